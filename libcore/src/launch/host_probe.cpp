#include "shardtrain/launch/host_probe.hpp"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>


namespace shardtrain::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int e) {
  switch (e) {
    case ECONNREFUSED: return "refused";
    case EHOSTUNREACH: return "no route to host";
    case ENETUNREACH: return "network unreachable";
    case ETIMEDOUT: return "timed out";
    default: return std::strerror(e);
  }
}

// Refused means the host's network stack answered: it is up, only the port is closed.
Reachability reach_of(int e) {
  if (e == 0 || e == ECONNREFUSED) return Reachability::kReachable;
  if (e == EHOSTUNREACH || e == ENETUNREACH || e == ETIMEDOUT || e == EHOSTDOWN) return Reachability::kUnreachable;
  return Reachability::kUnknown;
}

}  // namespace

std::vector<HostProbe> probe_hosts(const std::vector<std::string>& hosts, int port, double timeout_s) {
  const auto t0 = Clock::now();
  const auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::vector<HostProbe> out(hosts.size());
  std::vector<int> fds(hosts.size(), -1);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    out[i].host = hosts[i];
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(hosts[i].c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
      out[i].detail = "unknown host";
      continue;
    }
    const int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      out[i].detail = std::string("no socket: ") + std::strerror(errno);
      freeaddrinfo(found);
      continue;
    }
    const int rc = connect(fd, found->ai_addr, found->ai_addrlen);
    const int e = rc == 0 ? 0 : errno;
    freeaddrinfo(found);
    if (rc == 0 || e != EINPROGRESS) {  // answered at once (loopback, a local refusal, no route)
      out[i].reach = reach_of(e);
      out[i].detail = e == 0 ? "connected" : errno_text(e);
      out[i].seconds = since();
      close(fd);
      continue;
    }
    fds[i] = fd;
  }
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    std::vector<pollfd> waiting;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (fds[i] >= 0) waiting.push_back({fds[i], POLLOUT, 0}), which.push_back(i);
    if (waiting.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    if (poll(waiting.data(), waiting.size(), int(left)) < 0 && errno != EINTR) break;
    for (std::size_t k = 0; k < waiting.size(); ++k) {
      if (!waiting[k].revents) continue;
      const std::size_t i = which[k];
      int e = 0;
      socklen_t len = sizeof e;
      getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &e, &len);
      out[i].reach = reach_of(e);
      out[i].detail = e == 0 ? "connected" : errno_text(e);
      out[i].seconds = since();
      close(fds[i]);
      fds[i] = -1;
    }
  }
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i] < 0) continue;
    close(fds[i]);
    out[i].reach = Reachability::kUnreachable;
    out[i].detail = "no answer within " + std::to_string(int(std::lround(timeout_s * 1000))) + " ms";
    out[i].seconds = since();
  }
  return out;
}

}  // namespace shardtrain::launch
