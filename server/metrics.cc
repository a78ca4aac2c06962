#include "server/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <arpa/inet.h>

#include <exception>

#include "absl/strings/numbers.h"
#include "base/errors.h"
#include "base/strings.h"

namespace accy::server {

namespace {

// The gauges and cache counters, read from the service and the cache at
// each scrape.
class Snapshot final : public prometheus::Collectable {
 public:
  Snapshot(const AccydService& service, const CompileCache& cache) : service_(service), cache_(cache) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const ServiceStats s = service_.stats();
    const CacheStats c = cache_.stats();
    std::vector<prometheus::MetricFamily> out;
    auto one = [&](std::string name, std::string help, prometheus::MetricType type, double value,
                   std::vector<prometheus::ClientMetric::Label> labels = {}) {
      prometheus::ClientMetric m;
      m.label = std::move(labels);
      if (type == prometheus::MetricType::Counter) {
        m.counter.value = value;
      } else {
        m.gauge.value = value;
      }
      for (prometheus::MetricFamily& f : out) {
        if (f.name == name) {
          f.metric.push_back(std::move(m));
          return;
        }
      }
      out.push_back(prometheus::MetricFamily{std::move(name), std::move(help), type, {std::move(m)}});
    };
    using T = prometheus::MetricType;
    one("accyd_sessions", "Open sessions.", T::Gauge, static_cast<double>(s.sessions));
    one("accyd_programs", "Programs compiled and not released, across sessions.", T::Gauge,
        static_cast<double>(s.programs));
    one("accyd_regions", "Shared-memory regions mapped.", T::Gauge, static_cast<double>(s.regions));
    one("accyd_region_bytes_mapped", "Bytes of the shared-memory regions mapped.", T::Gauge,
        static_cast<double>(s.region_bytes));
    one("accyd_lease_expiries_total", "Sessions freed because their lease lapsed.", T::Counter,
        static_cast<double>(s.lease_expiries));
    one("accyd_cache_hits_total", "Compile cache hits, by level.", T::Counter, static_cast<double>(c.memory_hits),
        {{"level", "memory"}});
    one("accyd_cache_hits_total", "", T::Counter, static_cast<double>(c.disk_hits), {{"level", "disk"}});
    one("accyd_cache_misses_total", "Compiles the cache did not hold.", T::Counter, static_cast<double>(c.misses));
    one("accyd_cache_entries", "Compile cache entries, by level.", T::Gauge, static_cast<double>(c.memory_entries),
        {{"level", "memory"}});
    one("accyd_cache_entries", "", T::Gauge, static_cast<double>(c.disk_entries), {{"level", "disk"}});
    one("accyd_cache_disk_bytes", "Bytes the disk cache holds.", T::Gauge, static_cast<double>(c.disk_bytes));
    one("accyd_cache_corrupt_entries_total", "Disk cache entries found damaged and dropped.", T::Counter,
        static_cast<double>(c.corrupt_entries));
    return out;
  }

 private:
  const AccydService& service_;
  const CompileCache& cache_;
};

}  // namespace

struct Metrics::State {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<Snapshot> snapshot;
  std::unique_ptr<prometheus::Exposer> exposer;
  prometheus::Family<prometheus::Counter>* calls = nullptr;
  prometheus::Family<prometheus::Counter>* refused = nullptr;
  prometheus::Family<prometheus::Histogram>* seconds = nullptr;
};

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::serve(const std::string& address, const AccydService& service,
                                                        const CompileCache& cache) {
  // HOST:PORT, the port a number, a dotted host a valid IPv4 address
  // (the HTTP server would otherwise wait on what it cannot parse).
  const size_t colon = address.rfind(':');
  int port = 0;
  const std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  in_addr ip{};
  if (colon == std::string::npos || host.empty() || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 ||
      port > 65535 ||
      (host.find_first_not_of("0123456789.") == std::string::npos && inet_pton(AF_INET, host.c_str(), &ip) != 1)) {
    return makeError(ErrorKind::kInvalidArgument,
                     strCat("--metrics=", address, ": expected HOST:PORT (e.g. 127.0.0.1:9464), the port 1 to 65535"));
  }
  auto m = std::unique_ptr<Metrics>(new Metrics);
  m->state_ = std::make_shared<State>();
  State& s = *m->state_;
  s.calls = &prometheus::BuildCounter()
                 .Name("accyd_calls_total")
                 .Help("Calls as they ended, by method, device and status.")
                 .Register(*s.registry);
  s.refused = &prometheus::BuildCounter()
                   .Name("accyd_refused_total")
                   .Help("Calls refused or failed, by method and reason (the status).")
                   .Register(*s.registry);
  s.seconds = &prometheus::BuildHistogram()
                   .Name("accyd_call_seconds")
                   .Help("How long Invoke, ChannelInvoke and Compile calls took, by method and device.")
                   .Register(*s.registry);
  s.snapshot = std::make_shared<Snapshot>(service, cache);
  try {
    s.exposer = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    return makeError(ErrorKind::kInvalidArgument, strCat("--metrics=", address, ": cannot serve there: ", e.what()));
  }
  s.exposer->RegisterCollectable(s.registry);
  s.exposer->RegisterCollectable(s.snapshot);
  return m;
}

Metrics::~Metrics() = default;

CallObserver Metrics::observer() {
  std::shared_ptr<State> state = state_;
  return [state](std::string_view method, const std::string& device, session::Status status, double seconds) {
    const std::string m(method), st(session::statusName(status));
    state->calls->Add({{"method", m}, {"device", device}, {"status", st}}).Increment();
    if (status != session::Status::ok) state->refused->Add({{"method", m}, {"reason", st}}).Increment();
    if (method == "Invoke" || method == "ChannelInvoke" || method == "Compile") {
      // 10 us to 10 s, three buckets a decade.
      static const prometheus::Histogram::BucketBoundaries kBuckets = {
          1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1, 2, 5, 10};
      state->seconds->Add({{"method", m}, {"device", device}}, kBuckets).Observe(seconds);
    }
  };
}

}  // namespace accy::server
