// Metrics for operators (accyd --metrics=HOST:PORT): a Prometheus endpoint
// (prometheus-cpp's exposer) serving /metrics with
//   accyd_calls_total{method, device, status}          every call as it ended
//   accyd_refused_total{method, reason}                calls that ended in a
//                                                      refusal, by status
//   accyd_call_seconds{method, device}                 latency histograms of
//                                                      Invoke and Compile
//   accyd_cache_hits_total{level}, accyd_cache_misses_total,
//   accyd_cache_entries{level}, accyd_cache_disk_bytes   the compile cache
//   accyd_sessions, accyd_programs, accyd_regions, accyd_region_bytes_mapped
//   accyd_lease_expiries_total
// Off unless asked for; docs/ACCYD.md "Metrics".
#ifndef ACCY_SERVER_METRICS_H_
#define ACCY_SERVER_METRICS_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/session.h"
#include "server/compile_cache.h"
#include "server/service.h"

namespace accy::server {

class Metrics {
 public:
  // Serves /metrics on `address` ("127.0.0.1:9464"); `service` and `cache`
  // are read at each scrape (they must outlive the returned object).
  // InvalidArgument naming the address when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<Metrics>> serve(const std::string& address, const AccydService& service,
                                                        const CompileCache& cache);
  ~Metrics();

  // The observer to give AccydService::setCallObserver.
  CallObserver observer();

  struct State;

 private:
  Metrics() = default;
  std::shared_ptr<State> state_;
};

}  // namespace accy::server

#endif  // ACCY_SERVER_METRICS_H_
