// Metrics: one Prometheus registry per server process, served as text on GET /metrics.
//
// The runtime records what every server shares (requests by method and status, latency,
// in-flight requests, connections, bytes, queue depths); servers add their own phase timings
// through histogram()/counter()/gauge(). Handles are cheap to copy and safe to use from any
// thread: recording is a few atomic operations, never a lock or a map lookup on the hot path.
// Values that are cheap to read but costly to push (queue depths) are sampled at scrape time by
// collect hooks.
//
// Thread-safe. A Metrics object must outlive every handle taken from it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_annotations.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace apus::common {

using Labels = std::map<std::string, std::string>;

class CounterHandle {
 public:
  CounterHandle() = default;
  explicit CounterHandle(prometheus::Counter* c) : c_(c) {}
  void inc(double by = 1.0) const;
 private:
  prometheus::Counter* c_ = nullptr;
};

class GaugeHandle {
 public:
  GaugeHandle() = default;
  explicit GaugeHandle(prometheus::Gauge* g) : g_(g) {}
  void set(double v) const;
  void inc(double by = 1.0) const;
  void dec(double by = 1.0) const;
 private:
  prometheus::Gauge* g_ = nullptr;
};

class HistogramHandle {
 public:
  HistogramHandle() = default;
  explicit HistogramHandle(prometheus::Histogram* h) : h_(h) {}
  void observe(double v) const;
 private:
  prometheus::Histogram* h_ = nullptr;
};

// The steady clock in nanoseconds, as ScopedTimer reads it: an instant an atomic can hold.
int64_t steady_now_ns();

// Observes the seconds from its construction to its destruction into a histogram.
class ScopedTimer {
 public:
  explicit ScopedTimer(HistogramHandle h);
  ~ScopedTimer();
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  HistogramHandle h_;
  int64_t start_ns_;
};

class Metrics {
 public:
  // Latency buckets in seconds, 50 µs to 30 s: fine enough for loopback, wide enough for disks.
  static const std::vector<double>& latency_buckets();

  // `server` names the program ("object", "proxy"...) and becomes the label server="...".
  explicit Metrics(std::string server);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Families are created on first use; labels pick one child. Both calls take a lock: take the
  // handle once (at start-up or per route) and keep it.
  CounterHandle counter(const std::string& name, const std::string& help, const Labels& labels);
  GaugeHandle gauge(const std::string& name, const std::string& help, const Labels& labels);
  HistogramHandle histogram(const std::string& name, const std::string& help,
                            const Labels& labels, const std::vector<double>& buckets);

  // The HTTP runtime's own figures. request_finished() is lock-free after the first request of
  // each (method, status) pair.
  void request_started();
  void request_finished(std::string_view method, int status, double seconds, uint64_t bytes_in,
                        uint64_t bytes_out);
  void connection_opened();
  void connection_closed();

  // Runs `hook` before every serialization, e.g. to sample a queue depth into a gauge.
  void add_collect_hook(std::function<void()> hook);

  // All metrics in Prometheus text exposition format 0.0.4.
  std::string serialize();

 private:
  struct RequestSeries {
    std::atomic<prometheus::Counter*> count{nullptr};
    std::atomic<prometheus::Histogram*> latency{nullptr};
  };
  static constexpr int kMethods = 10;  // see method_index() in metrics.cpp
  static constexpr int kStatuses = 600;
  RequestSeries& series(int method, int status);

  std::string server_;
  std::shared_ptr<prometheus::Registry> registry_;
  Mutex mutex_;  // guards family creation, hooks_ and the slow path of series()
  std::vector<std::function<void()>> hooks_ APUS_GUARDED_BY(mutex_);
  std::unique_ptr<RequestSeries[]> series_;  // kMethods * kStatuses, created lazily
  GaugeHandle in_flight_, connections_;
  CounterHandle bytes_in_, bytes_out_;
};

}  // namespace apus::common
