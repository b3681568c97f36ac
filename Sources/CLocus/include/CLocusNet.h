// Internet sockets for the uplink: a non-blocking TCP connection and a UDP socket for the
// resolver. Addresses are raw network-order bytes (4 for IPv4, 16 for IPv6), as LocusCore's
// IPAddress holds them. Every function is one system call; results are >= 0 or -errno.
#ifndef CLOCUS_NET_H
#define CLOCUS_NET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { LOCUS_EINPROGRESS_RESULT = 1 };

/// Starts a non-blocking TCP connection to `address` (`address_size` 4 or 16 bytes) and `port`;
/// stores the descriptor in `*fd`. 0 when connected at once, LOCUS_EINPROGRESS_RESULT while the
/// connection is being made (poll for writing, then locus_socket_error), or -errno.
int locus_tcp_connect(const uint8_t *address, size_t address_size, uint16_t port, int *fd);
/// The pending error of a socket (SO_ERROR): 0 or -errno.
int locus_socket_error(int fd);
/// Acknowledge the peer's data at once (TCP_QUICKACK, which the kernel turns off again by
/// itself): a broker that sends small packets with Nagle on would otherwise wait for our
/// delayed ACK (40 ms) between two PUBACKs.
void locus_tcp_quickack(int fd);
/// A non-blocking UDP socket for `address_size`'s family (4 or 16), unbound; fd or -errno.
int locus_udp_open(size_t address_size);
/// Sends one datagram to `address`:`port`; bytes sent or -errno.
long locus_udp_send(int fd, const uint8_t *address, size_t address_size, uint16_t port, const void *buffer, size_t count);
/// Receives one datagram; its source address and port; bytes or -errno (-EAGAIN: none waiting).
long locus_udp_receive(int fd, void *buffer, size_t count, uint8_t *address, size_t *address_size, uint16_t *port);
/// recv(2) without blocking; 0 when the peer closed; -errno.
long locus_recv(int fd, void *buffer, size_t count);

#ifdef __cplusplus
}
#endif
#endif
