#define _GNU_SOURCE
#include "CNetlink.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/// Runs socket creation inside `namespace_fd`'s network namespace on a short-lived thread, so that the calling
/// thread's namespace never changes (a socket keeps the namespace it was created in).
struct sk_ns_job {
    int namespace_fd;
    unsigned int groups;
    int result;
    int error;
};

static int sk_nl_socket_here(unsigned int groups) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -1;
    struct sockaddr_nl local;
    memset(&local, 0, sizeof local);
    local.nl_family = AF_NETLINK;
    local.nl_groups = groups;
    if (bind(fd, (struct sockaddr *)&local, sizeof local) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static void *sk_ns_thread(void *argument) {
    struct sk_ns_job *job = argument;
    if (setns(job->namespace_fd, CLONE_NEWNET) != 0) {
        job->result = -1;
        job->error = errno;
        return NULL;
    }
    job->result = sk_nl_socket_here(job->groups);
    job->error = errno;
    return NULL;
}

static int sk_nl_socket(int namespace_fd, unsigned int groups) {
    if (namespace_fd < 0) return sk_nl_socket_here(groups);
    struct sk_ns_job job = {namespace_fd, groups, -1, 0};
    pthread_t thread;
    if (pthread_create(&thread, NULL, sk_ns_thread, &job) != 0) return -1;
    pthread_join(thread, NULL);
    errno = job.error;
    return job.result;
}

int sk_nl_open(int namespace_fd) {
    return sk_nl_socket(namespace_fd, RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE |
                                          RTMGRP_IPV6_ROUTE);
}

int sk_nl_query_socket(int namespace_fd) { return sk_nl_socket(namespace_fd, 0); }

int sk_nl_wait(int fd, int timeout_ms) {
    struct pollfd waiting = {fd, POLLIN, 0};
    int ready = poll(&waiting, 1, timeout_ms);
    if (ready <= 0) return ready < 0 && errno != EINTR ? -1 : 0;
    char buffer[16384];
    int changed = 0;
    for (;;) {
        ssize_t length = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (length < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == ENOBUFS) { changed = 1; continue; }  // messages were lost: re-evaluate anyway
            return -1;
        }
        if (length == 0) break;
        for (struct nlmsghdr *message = (struct nlmsghdr *)buffer; NLMSG_OK(message, (unsigned int)length);
             message = NLMSG_NEXT(message, length)) {
            if (message->nlmsg_type != NLMSG_DONE && message->nlmsg_type != NLMSG_ERROR) changed = 1;
        }
    }
    return changed;
}

/// Sends `request` and reads its single answer into `answer`; returns the answer's length or -1.
static ssize_t sk_nl_transact(int fd, struct nlmsghdr *request, char *answer, size_t capacity) {
    static unsigned int sequence = 1;
    request->nlmsg_seq = __atomic_add_fetch(&sequence, 1, __ATOMIC_RELAXED);
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    if (sendto(fd, request, request->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) return -1;
    for (;;) {
        struct pollfd waiting = {fd, POLLIN, 0};
        if (poll(&waiting, 1, 2000) <= 0) return -1;
        ssize_t length = recv(fd, answer, capacity, 0);
        if (length < 0) return errno == EINTR ? 0 : -1;
        struct nlmsghdr *message = (struct nlmsghdr *)answer;
        if (NLMSG_OK(message, (unsigned int)length) && message->nlmsg_seq == request->nlmsg_seq) return length;
    }
}

int sk_nl_route_interface(int query_fd, int family, const uint8_t *address) {
    struct {
        struct nlmsghdr header;
        struct rtmsg route;
        char attributes[64];
    } request;
    memset(&request, 0, sizeof request);
    size_t address_length = family == AF_INET6 ? 16 : 4;
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    request.header.nlmsg_type = RTM_GETROUTE;
    request.header.nlmsg_flags = NLM_F_REQUEST;
    request.route.rtm_family = (unsigned char)family;
    request.route.rtm_dst_len = (unsigned char)(address_length * 8);
    struct rtattr *destination = (struct rtattr *)((char *)&request + NLMSG_ALIGN(request.header.nlmsg_len));
    destination->rta_type = RTA_DST;
    destination->rta_len = RTA_LENGTH(address_length);
    memcpy(RTA_DATA(destination), address, address_length);
    request.header.nlmsg_len = NLMSG_ALIGN(request.header.nlmsg_len) + RTA_ALIGN(destination->rta_len);

    char answer[8192];
    ssize_t length = sk_nl_transact(query_fd, &request.header, answer, sizeof answer);
    if (length < 0) return -1;
    struct nlmsghdr *message = (struct nlmsghdr *)answer;
    if (message->nlmsg_type == NLMSG_ERROR) return 0;  // ENETUNREACH and friends: no route
    if (message->nlmsg_type != RTM_NEWROUTE) return -1;
    struct rtmsg *route = NLMSG_DATA(message);
    if (route->rtm_type == RTN_UNREACHABLE || route->rtm_type == RTN_BLACKHOLE || route->rtm_type == RTN_PROHIBIT)
        return 0;
    int attributes_length = (int)RTM_PAYLOAD(message);
    for (struct rtattr *attribute = RTM_RTA(route); RTA_OK(attribute, attributes_length);
         attribute = RTA_NEXT(attribute, attributes_length)) {
        if (attribute->rta_type == RTA_OIF) return *(int *)RTA_DATA(attribute);
    }
    return 0;
}

int sk_nl_link(int query_fd, int index, unsigned int *flags, unsigned short *type, char *name) {
    struct {
        struct nlmsghdr header;
        struct ifinfomsg link;
    } request;
    memset(&request, 0, sizeof request);
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
    request.header.nlmsg_type = RTM_GETLINK;
    request.header.nlmsg_flags = NLM_F_REQUEST;
    request.link.ifi_family = AF_UNSPEC;
    request.link.ifi_index = index;

    char answer[16384];
    ssize_t length = sk_nl_transact(query_fd, &request.header, answer, sizeof answer);
    if (length < 0) return -1;
    struct nlmsghdr *message = (struct nlmsghdr *)answer;
    if (message->nlmsg_type != RTM_NEWLINK) return -1;
    struct ifinfomsg *link = NLMSG_DATA(message);
    *flags = link->ifi_flags;
    *type = link->ifi_type;
    name[0] = 0;
    int attributes_length = (int)IFLA_PAYLOAD(message);
    for (struct rtattr *attribute = IFLA_RTA(link); RTA_OK(attribute, attributes_length);
         attribute = RTA_NEXT(attribute, attributes_length)) {
        if (attribute->rta_type == IFLA_IFNAME) {
            strncpy(name, RTA_DATA(attribute), IFNAMSIZ - 1);
            name[IFNAMSIZ - 1] = 0;
        }
    }
    return 0;
}
