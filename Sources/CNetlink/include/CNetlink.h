#ifndef SESSIONKIT_CNETLINK_H
#define SESSIONKIT_CNETLINK_H

// Netlink (rtnetlink) for SessionKit's reachability: the kernel's routes and links, watched through one socket.
// C because rtnetlink is a set of macros (NLMSG_*, RTA_*) over packed messages.

#include <stdint.h>

/// Opens a route netlink socket subscribed to link, address and route changes (IPv4 and IPv6), in the network
/// namespace of the file descriptor `namespace_fd` (-1: the caller's). Returns the socket, or -1 with errno set.
int sk_nl_open(int namespace_fd);

/// Waits up to `timeout_ms` for change messages and reads them all. Returns 1 when something changed, 0 on timeout,
/// -1 on error.
int sk_nl_wait(int fd, int timeout_ms);

/// What the kernel would use to reach `address` (4 bytes for AF_INET, 16 for AF_INET6) from the namespace of the
/// socket `query_fd`: the outgoing interface's index, 0 when there is no route, -1 on error.
int sk_nl_route_interface(int query_fd, int family, const uint8_t *address);

/// The state of interface `index`: its flags (IFF_*), ARPHRD type and name (IFNAMSIZ bytes). Returns 0, or -1 when
/// it does not exist.
int sk_nl_link(int query_fd, int index, unsigned int *flags, unsigned short *type, char *name);

/// A plain route netlink socket for queries in the namespace of `namespace_fd` (-1: the caller's), or -1.
int sk_nl_query_socket(int namespace_fd);

#endif
