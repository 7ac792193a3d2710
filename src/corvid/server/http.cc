#include "corvid/server/http.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>

#include "corvid/core/error.h"

namespace corvid::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {
// Bytes a client may send ahead while its request is being answered (pipelining is
// not served concurrently; past this the connection stops reading until it is).
constexpr size_t kMaxReadAhead = size_t{1} << 20;
constexpr uint32_t kMaxHeaderBytes = 64 * 1024;
// How long a connection may take to send a whole request (or stay idle between
// requests) before it is closed; an exchange in progress has no limit.
constexpr std::chrono::seconds kRequestTimeout{120};
// How long a connection that is closing waits for its client to stop sending (see
// linger_then_close).
constexpr std::chrono::seconds kLingerTimeout{5};
}  // namespace

uint64_t HttpLimits::body_limit(std::string_view target) const {
  const std::string_view path = target.substr(0, target.find('?'));
  for (const auto& [p, bytes] : path_body_bytes)
    if (path == p) return bytes;
  return max_body_bytes;
}

uint64_t HttpLimits::largest() const {
  uint64_t most = max_body_bytes;
  for (const auto& entry : path_body_bytes) most = std::max(most, entry.second);
  return most;
}

std::string status_reason(int status) {
  const beast::string_view reason = http::obsolete_reason(static_cast<http::status>(status));
  return std::string(reason.data(), reason.size());
}

// One TCP connection: reads requests one after another and writes what the current
// exchange produces, in order. Everything runs on the connection's strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<const Handler> handler, HttpLimits limits,
             std::shared_ptr<const RefusalCounter> refused, std::shared_ptr<const RefusalBody> refusal_body)
      : stream_(std::move(socket)),
        handler_(std::move(handler)),
        limits_(limits),
        refused_(std::move(refused)),
        refusal_body_(std::move(refusal_body)) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }
  void post(std::function<void()> fn) { net::post(stream_.get_executor(), std::move(fn)); }
  net::any_io_executor executor() { return stream_.get_executor(); }

  void write(std::string bytes) {
    if (closed_) return;
    writes_.push_back(std::move(bytes));
    flush();
  }

  // The exchange has written its last bytes; once they are out, the next request is read.
  void exchange_done(bool keep_alive) {
    exchange_open_ = false;
    exchange_.reset();
    keep_alive_ = keep_alive_ && keep_alive;
    if (!writing_ && writes_.empty()) next_request();
  }

 private:
  void read_request() {
    if (closed_) return;
    parser_.emplace();
    // The header is read under the largest limit (a Content-Length over it fails the
    // read); once the target is known, its own limit applies to the body.
    parser_->body_limit(limits_.largest());
    parser_->header_limit(kMaxHeaderBytes);
    stream_.expires_after(kRequestTimeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return reject_unreadable(ec);
    const uint64_t limit = route_body_limit();
    parser_->body_limit(limit);  // no body byte is parsed yet
    const auto length = parser_->content_length();
    if (length && *length > limit) return reject_too_large();
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code read_ec, size_t) { self->on_body(read_ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec) return reject_unreadable(ec);
    stream_.expires_never();
    HttpRequest request = parser_->release();
    parser_.reset();
    keep_alive_ = request.keep_alive();
    exchange_ = std::make_shared<Exchange>(shared_from_this(), std::move(request));
    exchange_open_ = true;
    watch();
    std::shared_ptr<Exchange> exchange = exchange_;
    try {
      (*handler_)(exchange);
    } catch (...) {  // the handler answers its own errors; this is the last guard
      const auto target = exchange->request().target();
      if (!exchange->done()) exchange->respond(500, error_text(500, "internal error", std::string(target.data(), target.size())));
    }
  }

  void reject_unreadable(beast::error_code ec) {
    if (ec == http::error::body_limit) return reject_too_large();
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == beast::error::timeout) {
      return close();
    }
    send_final(400, "malformed HTTP request");
  }

  void reject_too_large() {
    const uint64_t limit = parser_ ? route_body_limit() : limits_.max_body_bytes;
    send_final(413, "the request body is larger than the limit of " + std::to_string(limit) + " bytes");
  }

  // The body limit of the request being read (its target's, once the header is in).
  uint64_t route_body_limit() const {
    const auto target = parser_->get().target();
    return limits_.body_limit(std::string_view(target.data(), target.size()));
  }

  // The JSON error body for `target`'s API. `message` is plain text without quotes or backslashes.
  std::string error_text(int status, const std::string& message, const std::string& target) const {
    if (*refusal_body_) return (*refusal_body_)(status, message, target);
    return "{\"error\": {\"message\": \"" + message + "\", \"type\": \"" +
           (status >= 500 ? "server_error" : "invalid_request_error") + "\", \"param\": null, \"code\": null}}";
  }

  // An answer outside any exchange, after which the connection closes (its stream
  // may be in an unknown state).
  void send_final(int status, const std::string& message) {
    if (*refused_) (*refused_)(status);
    std::string target;
    // Set once the request line is read, even when a header then fails (a body over the
    // limit fails the header read).
    if (parser_) target = std::string(parser_->get().target());
    const std::string body = error_text(status, message, target);
    keep_alive_ = false;
    write("HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) +
          "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\nConnection: close\r\n\r\n" + body);
  }

  // Keeps a read pending during an exchange: it ends with an error when the client goes away.
  void watch() {
    if (watching_ || closed_ || buffer_.size() >= kMaxReadAhead) return;
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_watch(ec, n);
    });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (closed_) return;
    if (!ec) {
      buffer_.commit(n);  // the start of the next request: the parser reads it from the buffer
      if (exchange_open_) {
        watch();
      } else if (!writing_ && writes_.empty()) {
        next_request();
      }
      return;
    }
    if (ec == net::error::operation_aborted) {
      if (!exchange_open_ && !writing_ && writes_.empty()) next_request();
      return;
    }
    client_gone();
  }

  void flush() {
    if (writing_ || writes_.empty() || closed_) return;
    writing_ = true;
    net::async_write(stream_, net::buffer(writes_.front()),
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    // close() may have run between this write's completion and this handler (the pending
    // read saw the client go away first): it left the buffer of this write for us to free.
    if (closed_) {
      writes_.clear();
      return;
    }
    if (ec) return client_gone();
    writes_.pop_front();
    if (!writes_.empty()) return flush();
    if (!exchange_open_) next_request();
  }

  // Called when the current exchange is answered and its bytes are written.
  void next_request() {
    if (closed_) return;
    if (watching_) {
      stream_.cancel();  // on_watch (operation_aborted or data) comes back here
      return;
    }
    if (!keep_alive_) return linger_then_close();
    read_request();
  }

  // The last response is out and the connection does not stay open, but the client may
  // still be sending: a body refused unread (413), the rest of a malformed request (400).
  // Closing a socket with unread data makes the kernel answer with RST, which can
  // destroy the response before the client has read it (and the client sees
  // "connection reset by peer"). So: stop sending, read and drop what still comes until
  // the client closes its side (or kLingerTimeout), and only then close.
  void linger_then_close() {
    if (closed_) return;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTimeout);
    drain();
  }

  void drain() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || self->closed_) return self->close();
      self->drain();
    });
  }

  void client_gone() {
    if (exchange_open_ && exchange_) exchange_->client_gone();
    close();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    exchange_open_ = false;
    exchange_.reset();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    // A write in flight still reads writes_.front(): on_write frees it.
    if (writing_) {
      writes_.erase(writes_.begin() + 1, writes_.end());
    } else {
      writes_.clear();
    }
  }

  beast::tcp_stream stream_;
  std::shared_ptr<const Handler> handler_;
  HttpLimits limits_;
  std::shared_ptr<const RefusalCounter> refused_;
  std::shared_ptr<const RefusalBody> refusal_body_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> writes_;
  std::shared_ptr<Exchange> exchange_;
  bool writing_ = false, watching_ = false, exchange_open_ = false, keep_alive_ = true, closed_ = false;
};

Exchange::Exchange(std::shared_ptr<Connection> connection, HttpRequest request)
    : connection_(std::move(connection)), request_(std::move(request)) {}

void Exchange::respond(int status, std::string body, const std::string& content_type) {
  respond(status, std::move(body), content_type, "");
}

void Exchange::respond(int status, std::string body, const std::string& content_type,
                       const std::string& extra_headers) {
  if (done_) return;
  done_ = true;
  const bool keep_alive = request_.keep_alive() && status != 413;
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) +
                     "\r\nContent-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\n" + extra_headers + (keep_alive ? "\r\n" : "Connection: close\r\n\r\n");
  connection_->write(head + body);
  connection_->exchange_done(keep_alive);
}

void Exchange::begin_stream() {
  if (done_ || streaming_) return;
  streaming_ = true;
  connection_->write(std::string("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n") +
                     "Transfer-Encoding: chunked\r\n" + (request_.keep_alive() ? "\r\n" : "Connection: close\r\n\r\n"));
}

void Exchange::send(std::string data) {
  if (done_ || !streaming_ || data.empty()) return;
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  connection_->write(size + data + "\r\n");
}

void Exchange::end_stream() {
  if (done_ || !streaming_) return;
  done_ = true;
  connection_->write("0\r\n\r\n");
  connection_->exchange_done(request_.keep_alive());
}

void Exchange::post(std::function<void()> fn) { connection_->post(std::move(fn)); }

namespace {
// A timer on the connection's strand that calls back until its exchange is done. It
// holds the exchange weakly: the pending wait keeps the ticker, not the exchange, alive.
struct Ticker : std::enable_shared_from_this<Ticker> {
  Ticker(net::any_io_executor executor, std::chrono::milliseconds p, std::function<void(Exchange&)> f,
         std::weak_ptr<Exchange> e)
      : timer(std::move(executor)), period(p), fn(std::move(f)), exchange(std::move(e)) {}
  void arm() {
    timer.expires_after(period);
    timer.async_wait([self = shared_from_this()](beast::error_code ec) {
      const std::shared_ptr<Exchange> ex = self->exchange.lock();
      if (ec || !ex || ex->done()) return;
      self->fn(*ex);
      self->arm();
    });
  }
  net::steady_timer timer;
  std::chrono::milliseconds period;
  std::function<void(Exchange&)> fn;
  std::weak_ptr<Exchange> exchange;
};
}  // namespace

void Exchange::every(std::chrono::milliseconds period, std::function<void(Exchange&)> fn) {
  std::make_shared<Ticker>(connection_->executor(), period, std::move(fn), weak_from_this())->arm();
}

void Exchange::client_gone() {
  if (done_) return;
  done_ = true;
  if (on_cancel_) on_cancel_();
}

HttpServer::HttpServer(net::io_context& io, const std::string& host, uint16_t port, Handler handler, HttpLimits limits,
                       RefusalCounter refused, RefusalBody refusal_body)
    : io_(io),
      acceptor_(net::make_strand(io)),
      handler_(std::make_shared<const Handler>(std::move(handler))),
      limits_(limits),
      refused_(std::make_shared<const RefusalCounter>(std::move(refused))),
      refusal_body_(std::make_shared<const RefusalBody>(std::move(refusal_body))) {
  beast::error_code ec;
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  CORVID_CHECK(!ec && !endpoints.empty(), "cannot resolve the address ", host, ": ", ec.message());
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  CORVID_CHECK(!ec, "cannot listen on ", host, ":", port, ": ", ec.message());
  port_ = acceptor_.local_endpoint().port();
}

void HttpServer::start() {
  net::dispatch(acceptor_.get_executor(), [this] { accept(); });
}

void HttpServer::stop() {
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
  });
}

void HttpServer::accept() {
  acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // SSE chunks are small: send each at once
      std::make_shared<Connection>(std::move(socket), handler_, limits_, refused_, refusal_body_)->start();
    }
    accept();
  });
}

}  // namespace corvid::server
