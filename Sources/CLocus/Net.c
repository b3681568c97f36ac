// See include/CLocusNet.h.
#define _GNU_SOURCE
#include "CLocusNet.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/// A sockaddr for raw address bytes; its length, or 0 for a size that is neither 4 nor 16.
static socklen_t make_address(const uint8_t *address, size_t address_size, uint16_t port, struct sockaddr_storage *out) {
    memset(out, 0, sizeof *out);
    if (address_size == 4) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)out;
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        memcpy(&v4->sin_addr, address, 4);
        return sizeof *v4;
    }
    if (address_size == 16) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        memcpy(&v6->sin6_addr, address, 16);
        return sizeof *v6;
    }
    return 0;
}

int locus_tcp_connect(const uint8_t *address, size_t address_size, uint16_t port, int *fd) {
    struct sockaddr_storage target;
    socklen_t length = make_address(address, address_size, port, &target);
    if (length == 0) return -EINVAL;
    int s = socket(target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    // Small MQTT packets go out at once; the uplink batches by itself.
    int on = 1;
    (void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    if (connect(s, (struct sockaddr *)&target, length) == 0) {
        *fd = s;
        return 0;
    }
    if (errno == EINPROGRESS || errno == EINTR) {
        *fd = s;
        return LOCUS_EINPROGRESS_RESULT;
    }
    int error = errno;
    close(s);
    return -error;
}

void locus_tcp_quickack(int fd) {
    int on = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on);
}

int locus_socket_error(int fd) {
    int error = 0;
    socklen_t length = sizeof error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return -errno;
    return -error;
}

int locus_udp_open(size_t address_size) {
    int family = address_size == 16 ? AF_INET6 : AF_INET;
    int s = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    return s < 0 ? -errno : s;
}

long locus_udp_send(int fd, const uint8_t *address, size_t address_size, uint16_t port, const void *buffer, size_t count) {
    struct sockaddr_storage target;
    socklen_t length = make_address(address, address_size, port, &target);
    if (length == 0) return -EINVAL;
    ssize_t sent = sendto(fd, buffer, count, MSG_NOSIGNAL, (struct sockaddr *)&target, length);
    return sent < 0 ? -errno : sent;
}

long locus_udp_receive(int fd, void *buffer, size_t count, uint8_t *address, size_t *address_size, uint16_t *port) {
    struct sockaddr_storage source;
    socklen_t length = sizeof source;
    ssize_t got = recvfrom(fd, buffer, count, 0, (struct sockaddr *)&source, &length);
    if (got < 0) return -errno;
    if (source.ss_family == AF_INET) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&source;
        memcpy(address, &v4->sin_addr, 4);
        *address_size = 4;
        *port = ntohs(v4->sin_port);
    } else if (source.ss_family == AF_INET6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&source;
        memcpy(address, &v6->sin6_addr, 16);
        *address_size = 16;
        *port = ntohs(v6->sin6_port);
    } else {
        *address_size = 0;
        *port = 0;
    }
    return got;
}

long locus_recv(int fd, void *buffer, size_t count) {
    for (int attempt = 0; attempt < 8; attempt++) {
        ssize_t got = recv(fd, buffer, count, 0);
        if (got >= 0) return got;
        if (errno != EINTR) return -errno;
    }
    return -EINTR;
}
