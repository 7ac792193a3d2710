// The HTTP layer with a fake handler over real sockets: keep-alive, chunked event
// streams, the body limit (a refused body is drained, not reset), malformed requests, and
// clients going away mid-stream (one politely, many by reset while their streams write).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "corvid/server/http.h"

namespace corvid::server {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

class HttpServerTest : public ::testing::Test {
 protected:
  void start(Handler handler, HttpLimits limits = {}, RefusalBody refusal_body = {}) {
    server_ = std::make_unique<HttpServer>(io_, "127.0.0.1", 0, std::move(handler), limits,
                                           [this](int status) { refused_[status == 413 ? 0 : 1]++; },
                                           std::move(refusal_body));
    server_->start();
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_.run(); });
  }
  void TearDown() override {
    if (server_) server_->stop();
    io_.stop();
    for (std::thread& t : threads_) t.join();
  }

  tcp::socket connect() {
    tcp::socket socket(client_io_);
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()));
    return socket;
  }
  static void send(tcp::socket& socket, const std::string& bytes) { net::write(socket, net::buffer(bytes)); }
  // Reads until `marker` has arrived (or the connection closes); returns everything read.
  static std::string read_until(tcp::socket& socket, const std::string& marker) {
    std::string got;
    char buf[4096];
    while (got.find(marker) == std::string::npos) {
      boost::system::error_code ec;
      const size_t n = socket.read_some(net::buffer(buf), ec);
      if (ec) break;
      got.append(buf, n);
    }
    return got;
  }

  net::io_context io_{2};
  net::io_context client_io_;
  std::unique_ptr<HttpServer> server_;
  std::vector<std::thread> threads_;
  std::atomic<int> refused_[2] = {0, 0};  // responses sent outside an exchange: 413, others
};

TEST_F(HttpServerTest, KeepAliveServesRequestsInTurn) {
  start([](std::shared_ptr<Exchange> ex) {
    ex->respond(200, "{\"path\": \"" + std::string(ex->request().target()) + "\", \"body\": \"" +
                         ex->request().body() + "\"}");
  });
  tcp::socket s = connect();
  send(s, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
  std::string first = read_until(s, "}");
  EXPECT_EQ(first.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << first;
  EXPECT_NE(first.find("{\"path\": \"/a\", \"body\": \"hi\"}"), std::string::npos);
  send(s, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(read_until(s, "}").find("\"path\": \"/b\""), std::string::npos);
}

TEST_F(HttpServerTest, StreamsChunkedEventsFromOtherThreads) {
  std::thread producer;
  start([&producer](std::shared_ptr<Exchange> ex) {
    ex->begin_stream();
    // Events come from another thread (as from the engine) and are posted to the strand.
    producer = std::thread([ex] {
      for (int i = 0; i < 3; ++i) ex->post([ex, i] { ex->send("data: " + std::to_string(i) + "\n\n"); });
      ex->post([ex] { ex->end_stream(); });
    });
  });
  tcp::socket s = connect();
  send(s, "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  const std::string got = read_until(s, "0\r\n\r\n");
  producer.join();
  EXPECT_NE(got.find("Content-Type: text/event-stream"), std::string::npos);
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(got.find("9\r\ndata: 0\n\n\r\n9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n"), std::string::npos) << got;
}

TEST_F(HttpServerTest, EveryTicksOnTheStrandUntilTheExchangeEnds) {
  std::atomic<int> ticks_after_end{0};
  start([&](std::shared_ptr<Exchange> ex) {
    ex->begin_stream();
    auto ticks = std::make_shared<int>(0);
    ex->every(std::chrono::milliseconds(5), [ticks, &ticks_after_end](Exchange& e) {
      if (e.done()) ++ticks_after_end;
      e.send("tick " + std::to_string(++*ticks) + "\n");
      if (*ticks == 3) e.end_stream();
    });
  });
  tcp::socket s = connect();
  send(s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string got = read_until(s, "0\r\n\r\n");
  EXPECT_NE(got.find("tick 1\n"), std::string::npos) << got;
  EXPECT_NE(got.find("tick 3\n"), std::string::npos) << got;
  EXPECT_EQ(got.find("tick 4"), std::string::npos) << got;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the timer stops once the exchange is done
  EXPECT_EQ(ticks_after_end.load(), 0);
}

TEST_F(HttpServerTest, OversizedBodyGets413WithoutBeingRead) {
  std::atomic<int> handled{0};
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  start([&](std::shared_ptr<Exchange> ex) {
    ++handled;
    ex->respond(200, "{}");
  }, limits);
  tcp::socket s = connect();
  send(s, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{");
  const std::string got = read_until(s, "}}");
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
  EXPECT_NE(got.find("\"error\""), std::string::npos);
  EXPECT_EQ(handled.load(), 0);
  // Chunked bodies have no length up front: the parser's limit catches them.
  tcp::socket c = connect();
  send(c, "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n" + std::string(2000, 'a') + "\r\n");
  EXPECT_EQ(read_until(c, "}}").rfind("HTTP/1.1 413", 0), 0u);
  // Both refusals reached the counter (the metrics' requests by status).
  EXPECT_EQ(refused_[0].load(), 2);
  EXPECT_EQ(refused_[1].load(), 0);
}

TEST_F(HttpServerTest, UploadPathsHaveTheirOwnBodyLimit) {
  // A file upload route takes bodies over the JSON routes' limit, by Content-Length and
  // chunked; past its own limit it gets 413 naming that limit.
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  limits.path_body_bytes.emplace_back("/upload", 5000);
  start([](std::shared_ptr<Exchange> ex) { ex->respond(200, "{\"size\": " + std::to_string(ex->request().body().size()) + "}"); },
        limits);
  tcp::socket s = connect();
  send(s, "POST /upload?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n" + std::string(3000, 'a'));
  EXPECT_NE(read_until(s, "}").find("{\"size\": 3000}"), std::string::npos);
  tcp::socket c = connect();
  send(c, "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nbb8\r\n" + std::string(3000, 'a') +
              "\r\n0\r\n\r\n");
  EXPECT_NE(read_until(c, "}").find("{\"size\": 3000}"), std::string::npos);
  tcp::socket big = connect();
  send(big, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 6000\r\n\r\n{");
  const std::string refused = read_until(big, "}}");
  EXPECT_EQ(refused.rfind("HTTP/1.1 413", 0), 0u) << refused;
  EXPECT_NE(refused.find("limit of 5000 bytes"), std::string::npos) << refused;
  tcp::socket json = connect();  // between the two limits: the JSON route refuses it
  send(json, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n{");
  const std::string other = read_until(json, "}}");
  EXPECT_EQ(other.rfind("HTTP/1.1 413", 0), 0u) << other;
  EXPECT_NE(other.find("limit of 1000 bytes"), std::string::npos) << other;
  tcp::socket chunked = connect();  // chunked over the route's limit
  send(chunked, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n" +
                    std::string(2000, 'a') + "\r\n");
  EXPECT_EQ(read_until(chunked, "}}").rfind("HTTP/1.1 413", 0), 0u);
}

TEST_F(HttpServerTest, RefusalsTakeTheBodyOfTheirRoute) {
  // Each API answers in its own error shape, also where the HTTP layer answers alone.
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  start([](std::shared_ptr<Exchange> ex) {
          if (ex->request().target() == "/boom") throw std::runtime_error("boom");
          ex->respond(200, "{}");
        }, limits,
        [](int status, const std::string& message, const std::string& target) {
          return "{\"status\": " + std::to_string(status) + ", \"target\": \"" + target + "\", \"message\": \"" +
                 message + "\"}";
        });
  tcp::socket s = connect();
  send(s, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{");
  const std::string got = read_until(s, "\"}");
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
  EXPECT_NE(got.find("{\"status\": 413, \"target\": \"/v1/messages\", \"message\": \"the request body is larger than "
                     "the limit of 1000 bytes\"}"),
            std::string::npos)
      << got;
  tcp::socket t = connect();
  send(t, "THIS IS NOT HTTP\r\n\r\n");
  const std::string unreadable = read_until(t, "\"}");
  EXPECT_EQ(unreadable.rfind("HTTP/1.1 400", 0), 0u) << unreadable;
  EXPECT_NE(unreadable.find("{\"status\": 400, \"target\": \"\", \"message\": \"malformed HTTP request\"}"), std::string::npos)
      << unreadable;
  tcp::socket u = connect();
  send(u, "GET /boom HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string failed = read_until(u, "\"}");
  EXPECT_EQ(failed.rfind("HTTP/1.1 500", 0), 0u) << failed;
  EXPECT_NE(failed.find("{\"status\": 500, \"target\": \"/boom\", \"message\": \"internal error\"}"), std::string::npos) << failed;
}

TEST_F(HttpServerTest, RefusedBodySentInFullStillGetsThe413) {
  // The client sends all of an oversized body. The server must not close with that data
  // unread (the kernel would answer with RST, and the client would see a reset instead
  // of the 413): it drains until the client is done.
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  start([](std::shared_ptr<Exchange> ex) { ex->respond(200, "{}"); }, limits);
  for (int round = 0; round < 5; ++round) {
    tcp::socket s = connect();
    const std::string body(4 << 20, 'a');
    boost::system::error_code ec;
    net::write(s, net::buffer("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                              "\r\n\r\n" + body),
               ec);
    EXPECT_FALSE(ec) << "round " << round << ": sending the body: " << ec.message();
    std::string got;
    char buf[4096];
    while (got.find("}}") == std::string::npos) {
      const size_t n = s.read_some(net::buffer(buf), ec);
      if (ec) break;
      got.append(buf, n);
    }
    EXPECT_FALSE(ec) << "round " << round << ": reading the answer: " << ec.message();
    EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
  }
}

TEST_F(HttpServerTest, MalformedRequestGets400AndTheServerLivesOn) {
  start([](std::shared_ptr<Exchange> ex) { ex->respond(200, "ok", "text/plain"); });
  tcp::socket s = connect();
  send(s, "THIS IS NOT HTTP\r\n\r\n");
  EXPECT_EQ(read_until(s, "}}").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(refused_[1].load(), 1);  // counted, though no exchange ever saw it
  tcp::socket t = connect();
  send(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(read_until(t, "ok").rfind("HTTP/1.1 200", 0), 0u);
}

TEST_F(HttpServerTest, ClientGoingAwayMidStreamRunsTheCancelCallback) {
  std::atomic<bool> cancelled{false};
  std::atomic<bool> started{false};
  start([&](std::shared_ptr<Exchange> ex) {
    ex->on_cancel([&] { cancelled = true; });
    ex->begin_stream();
    ex->send("data: first\n\n");
    started = true;  // and then nothing more: a request still in the queue
  });
  {
    tcp::socket s = connect();
    send(s, "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    read_until(s, "first");
  }  // closed while the stream is open
  for (int i = 0; i < 200 && !cancelled; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(started.load());
  EXPECT_TRUE(cancelled.load());
}

TEST_F(HttpServerTest, ClientsResettingBusyStreamsDoNotHurtTheServer) {
  // Streams that write as fast as they can, and clients that read a little and reset the
  // connection: a write may complete just as the pending read sees the reset, and the
  // connection must then close once and cleanly. Afterwards a new client is served.
  std::atomic<int> cancelled{0};
  std::vector<std::thread> producers;
  std::mutex producers_mutex;
  start([&](std::shared_ptr<Exchange> ex) {
    if (ex->request().target() == "/ping") return ex->respond(200, "pong", "text/plain");
    ex->begin_stream();
    auto running = std::make_shared<std::atomic<bool>>(true);
    ex->on_cancel([&, running] {
      ++cancelled;
      *running = false;
    });
    std::lock_guard<std::mutex> lock(producers_mutex);
    producers.emplace_back([ex, running] {
      const std::string event = "data: " + std::string(3000, 'x') + "\n\n";
      for (int i = 0; i < 2000 && *running; ++i) {
        ex->post([ex, event] { ex->send(event); });
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      ex->post([ex] { ex->end_stream(); });
    });
  });
  constexpr int kClients = 60;
  for (int i = 0; i < kClients; ++i) {
    tcp::socket s = connect();
    send(s, "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    read_until(s, "data: ");
    s.set_option(net::socket_base::linger(true, 0));  // close() sends RST
    s.close();
  }
  for (int i = 0; i < 500 && cancelled < kClients; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(cancelled.load(), kClients);
  tcp::socket t = connect();
  send(t, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(read_until(t, "pong").rfind("HTTP/1.1 200", 0), 0u);
  std::lock_guard<std::mutex> lock(producers_mutex);
  for (std::thread& p : producers) p.join();
}

TEST_F(HttpServerTest, HandlerExceptionBecomes500) {
  start([](std::shared_ptr<Exchange>) { throw std::runtime_error("boom"); });
  tcp::socket s = connect();
  send(s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(read_until(s, "}}").rfind("HTTP/1.1 500", 0), 0u);
}

}  // namespace
}  // namespace corvid::server
