// A small asynchronous HTTP/1.1 server on Boost.Beast/Asio for the OpenAI and Anthropic APIs.
//
// An io_context runs on a few threads; each connection lives on its own strand, so
// its handlers never run concurrently and an idle connection (or a stream waiting
// for tokens) holds no thread. One request at a time per connection (keep-alive,
// no pipelining). A request becomes an Exchange that the handler answers either
// with one response or with a stream (server-sent events over chunked encoding).
//
// While an exchange is open the connection keeps a read pending on the socket, so
// a client that goes away is noticed at once (not only at the next write) and the
// exchange's cancel callback runs: that is how a disconnect cancels its request.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace corvid::server {

class Connection;

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

// One request and its answer. Its methods other than post() must run on the
// connection's strand: inside the handler, or in a function given to post().
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<Connection> connection, HttpRequest request);

  const HttpRequest& request() const { return request_; }
  // When the whole request had been read (latency metrics count from here).
  std::chrono::steady_clock::time_point arrived() const { return arrived_; }
  // The whole answer; ends the exchange.
  void respond(int status, std::string body, const std::string& content_type = "application/json");
  // The same with more header lines (each "Name: value\r\n").
  void respond(int status, std::string body, const std::string& content_type, const std::string& extra_headers);
  // A streamed answer: 200 with text/event-stream, then any number of send() calls,
  // then end_stream().
  void begin_stream();
  void send(std::string data);
  void end_stream();
  // Runs `fn` when the client goes away before the exchange ends (once, on the strand).
  void on_cancel(std::function<void()> fn) { on_cancel_ = std::move(fn); }
  // Runs `fn` on the connection's strand; callable from any thread.
  void post(std::function<void()> fn);
  // Runs `fn` on the strand every `period` until the exchange is done (stream keep-alives).
  void every(std::chrono::milliseconds period, std::function<void(Exchange&)> fn);
  // True once answered (or the client went away): nothing more will be sent.
  bool done() const { return done_; }

 private:
  friend class Connection;
  void client_gone();

  std::shared_ptr<Connection> connection_;
  HttpRequest request_;
  std::chrono::steady_clock::time_point arrived_ = std::chrono::steady_clock::now();
  std::function<void()> on_cancel_;
  bool streaming_ = false;
  bool done_ = false;
};

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

struct HttpLimits {
  uint64_t max_body_bytes = uint64_t{8} << 20;  // larger bodies get 413
  // Paths whose bodies have a limit of their own (file uploads: /v1/audio/...), as
  // (path, bytes); the query string is not part of the path.
  std::vector<std::pair<std::string, uint64_t>> path_body_bytes;

  // The limit for a request to `target` (a path, maybe with a query).
  uint64_t body_limit(std::string_view target) const;
  // The largest limit of any path (what the header is read under).
  uint64_t largest() const;
};

// Called with the status of each response the server sends on its own, outside any
// exchange (413 for a body over the limit, 400 for bytes that are not HTTP), so that
// metrics count every response; from the connection's strand, any thread.
using RefusalCounter = std::function<void(int status)>;
// The body of such a response (a JSON error) for the request target it answers ("" when
// the request was unreadable), so that each API's routes get its own error shape. Unset:
// OpenAI's shape.
using RefusalBody = std::function<std::string(int status, const std::string& message, const std::string& target)>;

class HttpServer {
 public:
  // Binds and listens at once (throws corvid::Error when the address cannot be used).
  HttpServer(boost::asio::io_context& io, const std::string& host, uint16_t port, Handler handler, HttpLimits limits,
             RefusalCounter refused = {}, RefusalBody refusal_body = {});
  void start();  // begins accepting
  void stop();   // stops accepting (open connections finish what they do); safe from any thread
  uint16_t port() const { return port_; }

 private:
  void accept();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<const Handler> handler_;
  HttpLimits limits_;
  std::shared_ptr<const RefusalCounter> refused_;
  std::shared_ptr<const RefusalBody> refusal_body_;
  uint16_t port_ = 0;
};

// "Not Found" for 404 etc.
std::string status_reason(int status);

}  // namespace corvid::server
