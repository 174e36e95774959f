#include "common/metrics/metrics.h"

#include <chrono>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>

namespace apus::common {

namespace {

constexpr std::string_view kMethodNames[] = {"GET",    "HEAD",      "PUT",   "POST",  "DELETE",
                                             "COPY",   "OPTIONS",   "REPLICATE", "SSYNC", "OTHER"};

int method_index(std::string_view method) {
  for (int i = 0; i < 9; ++i) {
    if (kMethodNames[i] == method) return i;
  }
  return 9;
}

}  // namespace

void CounterHandle::inc(double by) const {
  if (c_) c_->Increment(by);
}
void GaugeHandle::set(double v) const {
  if (g_) g_->Set(v);
}
void GaugeHandle::inc(double by) const {
  if (g_) g_->Increment(by);
}
void GaugeHandle::dec(double by) const {
  if (g_) g_->Decrement(by);
}
void HistogramHandle::observe(double v) const {
  if (h_) h_->Observe(v);
}

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ScopedTimer::ScopedTimer(HistogramHandle h) : h_(h), start_ns_(steady_now_ns()) {}
ScopedTimer::~ScopedTimer() {
  h_.observe(static_cast<double>(steady_now_ns() - start_ns_) / 1e9);
}

const std::vector<double>& Metrics::latency_buckets() {
  static const std::vector<double> kBuckets = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                               0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                               0.5,     1,      2.5,     5,      10,    30};
  return kBuckets;
}

Metrics::Metrics(std::string server)
    : server_(std::move(server)),
      registry_(std::make_shared<prometheus::Registry>()),
      series_(std::make_unique<RequestSeries[]>(kMethods * kStatuses)) {
  in_flight_ = gauge("apus_http_requests_in_flight", "Requests being served", {});
  connections_ = gauge("apus_http_connections", "Open client connections", {});
  bytes_in_ = counter("apus_http_received_bytes_total", "Request body bytes received", {});
  bytes_out_ = counter("apus_http_sent_bytes_total", "Response body bytes sent", {});
}

Metrics::~Metrics() = default;

namespace {
Labels with_server(const Labels& labels, const std::string& server) {
  Labels all = labels;
  all.emplace("server", server);
  return all;
}
}  // namespace

CounterHandle Metrics::counter(const std::string& name, const std::string& help,
                               const Labels& labels) {
  MutexLock lock(&mutex_);
  return CounterHandle(&prometheus::BuildCounter().Name(name).Help(help).Register(*registry_)
                            .Add(with_server(labels, server_)));
}

GaugeHandle Metrics::gauge(const std::string& name, const std::string& help,
                           const Labels& labels) {
  MutexLock lock(&mutex_);
  return GaugeHandle(&prometheus::BuildGauge().Name(name).Help(help).Register(*registry_)
                          .Add(with_server(labels, server_)));
}

HistogramHandle Metrics::histogram(const std::string& name, const std::string& help,
                                   const Labels& labels, const std::vector<double>& buckets) {
  MutexLock lock(&mutex_);
  return HistogramHandle(&prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_)
                              .Add(with_server(labels, server_), buckets));
}

Metrics::RequestSeries& Metrics::series(int method, int status) {
  if (status < 0 || status >= kStatuses) status = 0;
  RequestSeries& s = series_[method * kStatuses + status];
  if (s.count.load(std::memory_order_acquire) != nullptr) return s;
  MutexLock lock(&mutex_);
  if (s.count.load(std::memory_order_relaxed) != nullptr) return s;
  Labels labels = with_server(
      {{"method", std::string(kMethodNames[method])}, {"status", std::to_string(status)}}, server_);
  auto& latency = prometheus::BuildHistogram()
                      .Name("apus_http_request_duration_seconds")
                      .Help("Time from request headers read to response sent")
                      .Register(*registry_)
                      .Add(labels, latency_buckets());
  auto& count = prometheus::BuildCounter()
                    .Name("apus_http_requests_total")
                    .Help("Requests served, by method and status")
                    .Register(*registry_)
                    .Add(labels);
  s.latency.store(&latency, std::memory_order_release);
  s.count.store(&count, std::memory_order_release);  // published last: readers test count
  return s;
}

void Metrics::request_started() { in_flight_.inc(); }

void Metrics::request_finished(std::string_view method, int status, double seconds,
                               uint64_t bytes_in, uint64_t bytes_out) {
  in_flight_.dec();
  RequestSeries& s = series(method_index(method), status);
  s.count.load(std::memory_order_acquire)->Increment();
  s.latency.load(std::memory_order_acquire)->Observe(seconds);
  if (bytes_in) bytes_in_.inc(static_cast<double>(bytes_in));
  if (bytes_out) bytes_out_.inc(static_cast<double>(bytes_out));
}

void Metrics::connection_opened() { connections_.inc(); }
void Metrics::connection_closed() { connections_.dec(); }

void Metrics::add_collect_hook(std::function<void()> hook) {
  MutexLock lock(&mutex_);
  hooks_.push_back(std::move(hook));
}

std::string Metrics::serialize() {
  std::vector<std::function<void()>> hooks;
  {
    MutexLock lock(&mutex_);
    hooks = hooks_;
  }
  for (auto& hook : hooks) hook();
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace apus::common
