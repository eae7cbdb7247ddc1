#include "run/network.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "rankscope/model/error.h"
#include "rankscope/model/text.h"

namespace rankscope::launch {

namespace {

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr) >> 24) == 127;
  }
  return address->sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
}

}  // namespace

// Where the other hosts reach rank 0's host, for torch.distributed's
// rendezvous: its host name, unless that names only a loopback address (as
// Debian's installer writes into /etc/hosts: 127.0.1.1), when no other host
// could reach it by that name; then the first IPv4 address of an interface
// that is up and not loopback. A MASTER_ADDR the user set wins.
std::string master_address() {
  if (const char* given = std::getenv("MASTER_ADDR"); given && *given) return given;
  const std::string name = host_name();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  bool reachable_by_name = false;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &found) == 0) {
    for (const addrinfo* a = found; a; a = a->ai_next) reachable_by_name = reachable_by_name || !is_loopback(a->ai_addr);
    ::freeaddrinfo(found);
  }
  if (reachable_by_name) return name;
  ifaddrs* interfaces = nullptr;
  std::string address = name;
  if (::getifaddrs(&interfaces) == 0) {
    for (const ifaddrs* i = interfaces; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) || is_loopback(i->ifa_addr)) continue;
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
      address = text;
      break;
    }
    ::freeifaddrs(interfaces);
  }
  return address;
}

// A port free on rank 0's host now, for torch.distributed's rendezvous,
// unless the user set MASTER_PORT.
int given_or_free_port() {
  if (const char* given = std::getenv("MASTER_PORT"); given && *given) {
    const std::optional<int> port = parse_integer<int>(given);
    if (!port || *port < 1 || *port > 65535) {
      throw Error(std::string("MASTER_PORT='") + given + "' is not a port number (1-65535)");
    }
    return *port;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  socklen_t length = sizeof(address);
  int port = 29500;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

}  // namespace rankscope::launch
