// http_load: a small closed-loop HTTP load generator for the runtime micro-benchmark.
//
//   http_load --port P [--host 127.0.0.1] [--path /healthcheck] [--concurrency C]
//             [--seconds S] [--warmup S] [--fresh] [--threads T]
//             [--method GET|PUT] [--size BYTES] [--objects N] [--backend] [--count N]
//             [--header "Name: value"]... [--query STRING] [--status N]
//
// With --objects N the path is a prefix and each request names one of N objects
// (<path>/o<i>, round robin). --method PUT sends a body of --size bytes. --backend adds what a
// Swift storage server needs from a proxy: X-Timestamp (now, unique per request) and
// Content-Type, so object servers can be driven directly. --header adds a header to every
// request (repeatable); --query appends "?STRING" to every path; --status sets the status a
// response must have to count (default 200, 201 for PUT).
// C connections each send GET requests one after another (keep-alive), or open a fresh
// connection per request with --fresh. Every response is checked (status 200 and a complete
// body), so a broken answer is counted as an error, never as a fast one. Prints one JSON object:
// requests, errors, seconds, requests per second, latency percentiles, and the client's own CPU
// seconds (so a reader can tell whether the client was the bottleneck), plus Little's-law
// concurrency (requests x mean latency / window), which should be close to C.
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace net = boost::asio;
using net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string path = "/healthcheck";
  int concurrency = 1;
  double seconds = 5;
  double warmup = 1;
  bool fresh = false;
  int threads = 1;
  std::string method = "GET";
  size_t size = 0;
  uint64_t objects = 0;
  uint64_t count = 0;  // stop after this many requests in all (0 = run for --seconds)
  bool backend = false;
  std::vector<std::string> headers;  // "Name: value"
  std::string query;
  int status = 0;  // 0: 200, or 201 for PUT
};

// A unique, increasing X-Timestamp per request: now, or 10 us after the previous one if that
// is later, so no two requests share one and a later request never carries an older one.
std::string next_timestamp() {
  static std::atomic<int64_t> last{0};
  auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count() / 10;  // Swift's 10 us units
  int64_t prev = last.load();
  int64_t next;
  do {
    next = std::max<int64_t>(now, prev + 1);
  } while (!last.compare_exchange_weak(prev, next));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%010lld.%05lld", static_cast<long long>(next / 100000),
                static_cast<long long>(next % 100000));
  return buf;
}

std::string build_request(const Options& opt, uint64_t n, const std::string& body) {
  std::string path = opt.path;
  if (opt.objects) path += "/o" + std::to_string(n % opt.objects);
  if (!opt.query.empty()) path += "?" + opt.query;
  std::string req = opt.method + " " + path + " HTTP/1.1\r\nHost: " + opt.host + "\r\n";
  if (opt.fresh) req += "Connection: close\r\n";
  if (opt.backend) {
    req += "X-Timestamp: " + next_timestamp() + "\r\nContent-Type: application/octet-stream\r\n";
  }
  for (const auto& h : opt.headers) req += h + "\r\n";
  if (opt.method == "PUT") req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n";
  return req;
}

struct Stats {
  std::vector<double> latencies;  // seconds, measured window only
  uint64_t errors = 0;
};

constexpr auto kTuple = net::as_tuple(net::use_awaitable);

// Reads one response: head, then Content-Length bytes. Returns false on anything unexpected.
net::awaitable<bool> read_response(tcp::socket& sock, net::streambuf& buf, int want_status) {
  auto [ec, n] = co_await net::async_read_until(sock, buf, "\r\n\r\n", kTuple);
  if (ec) co_return false;
  std::string head(static_cast<const char*>(buf.data().data()), n);
  buf.consume(n);
  if (head.size() < 12 || std::atoi(head.c_str() + 9) != want_status) co_return false;
  size_t length = 0;
  for (const char* key : {"\r\nContent-Length:", "\r\ncontent-length:"}) {
    auto pos = head.find(key);
    if (pos != std::string::npos) length = std::strtoul(head.c_str() + pos + 17, nullptr, 10);
  }
  if (buf.size() < length) {
    auto [ec2, n2] = co_await net::async_read(sock, buf, net::transfer_exactly(length - buf.size()),
                                              kTuple);
    if (ec2) co_return false;
  }
  buf.consume(length);
  co_return true;
}

net::awaitable<void> client_loop(const Options& opt, tcp::endpoint ep, Clock::time_point measure,
                                 Clock::time_point end, Stats& stats) {
  auto ex = co_await net::this_coro::executor;
  static std::atomic<uint64_t> sequence{0};
  const std::string body = opt.method == "PUT" ? std::string(opt.size, 'b') : std::string();
  std::optional<tcp::socket> sock;
  net::streambuf buf;
  while (Clock::now() < end) {
    if (opt.count && sequence.load() >= opt.count) break;
    auto start = Clock::now();
    bool ok = true;
    if (!sock) {
      sock.emplace(ex);
      auto [ec] = co_await sock->async_connect(ep, kTuple);
      if (ec) ok = false;
      if (ok) sock->set_option(tcp::no_delay(true));
      buf.consume(buf.size());
    }
    if (ok) {
      std::string request = build_request(opt, sequence++, body);
      std::array<net::const_buffer, 2> buffers{net::buffer(request), net::buffer(body)};
      auto [ec, n] = co_await net::async_write(*sock, buffers, kTuple);
      int want = opt.status ? opt.status : opt.method == "PUT" ? 201 : 200;
      ok = !ec && co_await read_response(*sock, buf, want);
    }
    double latency = std::chrono::duration<double>(Clock::now() - start).count();
    if (start >= measure) {
      if (ok) {
        stats.latencies.push_back(latency);
      } else {
        ++stats.errors;
      }
    }
    if (!ok || opt.fresh) sock.reset();
  }
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--host") o.host = next();
    else if (a == "--port") o.port = static_cast<uint16_t>(std::atoi(next()));
    else if (a == "--path") o.path = next();
    else if (a == "--concurrency") o.concurrency = std::atoi(next());
    else if (a == "--seconds") o.seconds = std::atof(next());
    else if (a == "--warmup") o.warmup = std::atof(next());
    else if (a == "--threads") o.threads = std::atoi(next());
    else if (a == "--fresh") o.fresh = true;
    else if (a == "--method") o.method = next();
    else if (a == "--size") o.size = std::strtoull(next(), nullptr, 10);
    else if (a == "--objects") o.objects = std::strtoull(next(), nullptr, 10);
    else if (a == "--backend") o.backend = true;
    else if (a == "--count") o.count = std::strtoull(next(), nullptr, 10);
    else if (a == "--header") o.headers.push_back(next());
    else if (a == "--query") o.query = next();
    else if (a == "--status") o.status = std::atoi(next());
    else return false;
  }
  return o.port != 0 && o.concurrency > 0 && o.threads > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, opt)) {
    std::fprintf(stderr,
                 "usage: http_load --port P [--host H] [--path /p] [--concurrency C] "
                 "[--seconds S] [--warmup S] [--fresh] [--threads T]\n");
    return 2;
  }
  tcp::endpoint ep(net::ip::make_address(opt.host), opt.port);
  auto t0 = Clock::now();
  auto measure = t0 + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(opt.warmup));
  auto end = measure + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(opt.seconds));
  double cpu0 = cpu_seconds();
  std::vector<Stats> stats(opt.concurrency);
  std::vector<std::unique_ptr<net::io_context>> loops;
  for (int t = 0; t < opt.threads; ++t) loops.push_back(std::make_unique<net::io_context>(1));
  for (int c = 0; c < opt.concurrency; ++c) {
    net::co_spawn(*loops[c % opt.threads], client_loop(opt, ep, measure, end, stats[c]),
                  net::detached);
  }
  std::vector<std::thread> threads;
  for (auto& l : loops) threads.emplace_back([&l] { l->run(); });
  for (auto& t : threads) t.join();
  double wall = std::chrono::duration<double>(Clock::now() - measure).count();
  double cpu = cpu_seconds() - cpu0;

  std::vector<double> all;
  uint64_t errors = 0;
  for (auto& s : stats) {
    all.insert(all.end(), s.latencies.begin(), s.latencies.end());
    errors += s.errors;
  }
  std::sort(all.begin(), all.end());
  double sum = 0;
  for (double v : all) sum += v;
  double mean = all.empty() ? 0 : sum / static_cast<double>(all.size());
  std::printf(
      "{\"requests\": %zu, \"errors\": %lu, \"window_s\": %.3f, \"warmup_s\": %.3f, "
      "\"rps\": %.1f, \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, \"max_ms\": %.4f, "
      "\"mean_ms\": %.4f, \"littles_law_concurrency\": %.2f, \"client_cpu_s\": %.3f, "
      "\"concurrency\": %d, \"fresh\": %s}\n",
      all.size(), static_cast<unsigned long>(errors), opt.seconds, opt.warmup,
      static_cast<double>(all.size()) / opt.seconds, percentile(all, 0.5) * 1e3,
      percentile(all, 0.9) * 1e3, percentile(all, 0.99) * 1e3,
      all.empty() ? 0.0 : all.back() * 1e3, mean * 1e3,
      mean * static_cast<double>(all.size()) / opt.seconds, cpu, opt.concurrency,
      opt.fresh ? "true" : "false");
  (void)wall;
  return errors > 0 && all.empty() ? 1 : 0;
}
