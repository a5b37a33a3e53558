#include "shardtrain/telemetry/metrics_endpoint.hpp"

#include <dlfcn.h>
#include <cerrno>
#include <pthread.h>

#include <CivetServer.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include <mutex>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

// civetweb's own words for a failed start: its log callback has no user pointer before the
// server exists, so the first message since the start began goes to one process-wide slot (the
// first is the cause, e.g. "cannot bind to 127.0.0.1:9400: 98 (Address already in use)"; the
// last only "Failed to setup server ports").
std::mutex g_log_mu;
std::string g_first_log;
int keep_log_message(const mg_connection*, const char* message) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  if (g_first_log.empty() && message) g_first_log = message;
  return 1;  // handled: civetweb prints nothing itself
}

}  // namespace

}  // namespace shardtrain

// civetweb (Debian's build) starts its HTTP threads with a fixed 100 KiB stack, and glibc's
// pthread_create refuses (EINVAL) a stack that cannot hold the process's static TLS: the trainers
// link the CUDA libraries, whose thread-locals alone take about 190 KiB, so every endpoint failed
// with "Cannot create threads: error 22". This definition, in the executable, takes the place of
// libc's for every library (symbol interposition) and raises an explicit stack size below
// kMinExplicitStack to it; larger requests, and threads that set no size, are untouched.
extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  constexpr size_t kMinExplicitStack = 1 << 20;  // 1 MiB: five times the TLS seen, still small
  using Real = int (*)(pthread_attr_t*, size_t);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (!real) return EINVAL;
  return real(attr, size < kMinExplicitStack ? kMinExplicitStack : size);
}

namespace shardtrain {

MetricsEndpoint::MetricsEndpoint(const std::string& bind, int port, std::weak_ptr<prometheus::Collectable> collectable)
    : address_(bind + ":" + std::to_string(port)) {
  if (port < 1 || port > 65535) throw UsageError("--metrics-port: port " + std::to_string(port) + " is not in 1..65535");
  try {
    // Two HTTP threads: a Prometheus server and a person's curl at once, never the step loop's.
    {
      std::lock_guard<std::mutex> lock(g_log_mu);
      g_first_log.clear();
    }
    static const CivetCallbacks callbacks = [] {
      CivetCallbacks c;
      c.log_message = keep_log_message;
      return c;
    }();
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{"listening_ports", address_, "num_threads", "2"},
                                                     &callbacks);
  } catch (const std::exception& e) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(g_log_mu);
      why = g_first_log.empty() ? e.what() : g_first_log;
    }
    throw UsageError("--metrics-port: cannot serve metrics on " + address_ + " (" + why +
                     "): choose a free --metrics-port, or another --metrics-bind");
  }
  exposer_->RegisterCollectable(collectable);
}

MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace shardtrain
