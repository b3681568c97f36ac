// CLocus: the only C in Sources. Thin functions over libc, libgpiod (v1 API) and libbluetooth,
// plus the hooks the Embedded Swift runtime needs. No policy lives here: every function does one
// system call (or one library call) and returns its result; errors come back as -errno so Swift
// never has to read a thread-local `errno` macro.
#ifndef CLOCUS_H
#define CLOCUS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

// The uplink's internet sockets and TLS, in files of their own (Net.c, TLS.c).
#include "CLocusNet.h"
#include "CLocusTLS.h"
#include "CLocusSign.h"
// What blocking host programs (locus-fleet) need, in a file of its own (Host.c).
#include "CLocusHost.h"
// The kernel seam a simulation answers (locus replay, the simulator).
#include "CLocusKernel.h"

#ifdef __cplusplus
extern "C" {
#endif

// MARK: process

/// Number of arguments captured from the process entry (glibc passes argc/argv to constructors).
int locus_argc(void);
/// Argument `index` (0 = program name), or NULL when out of range.
const char *locus_argv(int index);
/// Value of an environment variable, or NULL.
const char *locus_getenv(const char *name);
void locus_exit(int status) __attribute__((noreturn));
int locus_getpid(void);
/// Sends `signal` to `pid`; 0 or -errno.
int locus_kill(int pid, int signal);
/// Description of an errno value (positive), never NULL.
const char *locus_strerror(int error);

// MARK: errno values Swift names (SystemError, the HCI scanner's advice): from the C headers

enum {
    LOCUS_EPERM = EPERM, LOCUS_ENOENT = ENOENT, LOCUS_EINTR = EINTR, LOCUS_EIO = EIO, LOCUS_ENXIO = ENXIO,
    LOCUS_EAGAIN = EAGAIN, LOCUS_EACCES = EACCES, LOCUS_EBUSY = EBUSY, LOCUS_EEXIST = EEXIST, LOCUS_ENODEV = ENODEV,
    LOCUS_EISDIR = EISDIR, LOCUS_EINVAL = EINVAL, LOCUS_EFBIG = EFBIG, LOCUS_ENOSPC = ENOSPC, LOCUS_EPIPE = EPIPE,
    LOCUS_EBADFD = EBADFD, LOCUS_EAFNOSUPPORT = EAFNOSUPPORT, LOCUS_ENETDOWN = ENETDOWN, LOCUS_ETIMEDOUT = ETIMEDOUT,
    LOCUS_ERFKILL = ERFKILL, LOCUS_EROFS = EROFS,
};

// MARK: file descriptors (return >= 0 or -errno; EINTR is retried a bounded number of times)

enum {
    LOCUS_O_READ = 1,
    LOCUS_O_WRITE = 2,
    LOCUS_O_CREATE = 4,
    LOCUS_O_TRUNCATE = 8,
    LOCUS_O_APPEND = 16,
    LOCUS_O_NONBLOCK = 32,
    LOCUS_O_EXCLUSIVE = 64,
    LOCUS_O_DIRECTORY = 128,
};
int locus_open(const char *path, int flags, int mode);
/// mkfifo(3); 0 or -errno (EEXIST when something is there already).
int locus_mkfifo(const char *path, int mode);
int locus_close(int fd);
/// dup(2) with close-on-exec: a second descriptor for the same open file (and its flock).
int locus_dup(int fd);
long locus_read(int fd, void *buffer, size_t count);
long locus_write(int fd, const void *buffer, size_t count);
long locus_pread(int fd, void *buffer, size_t count, int64_t offset);
int locus_fsync(int fd);
int locus_fdatasync(int fd);
int locus_ftruncate(int fd, int64_t length);
int64_t locus_lseek(int fd, int64_t offset, int whence);
/// File size in bytes, or -errno.
int64_t locus_file_size(int fd);
int locus_mkdir(const char *path, int mode);
int locus_chmod(const char *path, int mode);
int locus_unlink(const char *path);
int locus_rename(const char *from, const char *to);
/// Exclusive, non-blocking advisory lock (flock). 0, or -EWOULDBLOCK when another holds it.
int locus_lock_exclusive(int fd);
/// Maps the first `size` bytes of `fd` read-only (PROT_READ, MAP_PRIVATE): the place index. NULL
/// with `*error` = -errno on failure.
void *locus_map_readonly(int fd, int64_t size, int *error);
int locus_unmap(void *address, int64_t size);
/// 1 if `path` names a directory, 0 if it names something else, -errno if it cannot be stat'ed.
int locus_is_directory(const char *path);
/// The permission bits of `path` (st_mode & 07777) and its owner's uid, or -errno.
int locus_file_mode(const char *path, uint32_t *owner);

/// Directory listing: calls `visit(name, context)` for every entry except "." and "..".
/// Returns the number of entries visited or -errno.
int locus_list_directory(const char *path, void (*visit)(const char *name, void *context), void *context);
/// Creates a new directory from `template` ("/tmp/name.XXXXXX", its X's replaced in place), mode 0700.
int locus_make_temporary_directory(char *template_path);
/// Removes `path` and everything under it (not following symbolic links). 0 or -errno.
int locus_remove_tree(const char *path);

// MARK: time

/// CLOCK_MONOTONIC in nanoseconds.
int64_t locus_monotonic_ns(void);
/// CLOCK_REALTIME in nanoseconds since the Unix epoch.
int64_t locus_realtime_ns(void);
/// 64 random bits (getrandom(2); a simulation's own, seeded, when it hooks `random64`): the
/// reconnect backoff's spread and the name lookup's query ids.
uint64_t locus_random64(void);

// MARK: poll loop primitives

enum { LOCUS_POLLIN = 1, LOCUS_POLLOUT = 4, LOCUS_POLLERR = 8, LOCUS_POLLHUP = 16, LOCUS_POLLNVAL = 32 };
/// poll(2) over parallel arrays; `revents` receives the LOCUS_POLL* bits. Returns ready count or -errno.
int locus_poll(const int *fds, const short *events, short *revents, int count, int timeout_ms);
/// A CLOCK_MONOTONIC timerfd (non-blocking, close-on-exec).
int locus_timerfd_create(void);
/// Arms `fd` to fire once after `delay_ns` (0 disarms).
int locus_timerfd_arm(int fd, int64_t delay_ns);
/// A signalfd receiving SIGTERM, SIGINT and SIGHUP (which are blocked for normal delivery).
int locus_signalfd_create(void);
/// Reads one signal number from a signalfd, 0 when none is pending, or -errno.
int locus_signalfd_read(int fd);
enum { LOCUS_SIGHUP = 1, LOCUS_SIGINT = 2, LOCUS_SIGKILL = 9, LOCUS_SIGTERM = 15 };

// MARK: UART

/// Opens a serial device raw, 8N1, no flow control, non-blocking, at `baud` (a standard rate).
/// Returns fd or -errno; -EINVAL for a baud rate termios does not know.
int locus_uart_open(const char *path, int baud);
/// 1 when `baud` is a rate termios supports.
int locus_uart_baud_supported(int baud);

/// Opens a pseudo-terminal pair for feeding recordings: the master (raw, non-blocking) is
/// returned and the slave's path written to `slave_path`. Returns the master fd or -errno.
int locus_pty_open(char *slave_path, size_t capacity);
/// Makes `path` a symbolic link to `target`, replacing an existing link or file.
int locus_symlink(const char *target, const char *path);

// MARK: Unix sockets

/// A listening SOCK_STREAM socket at `path` (an existing socket file is replaced), non-blocking.
int locus_unix_listen(const char *path, int backlog);
/// Accepts one connection (non-blocking); -EAGAIN when none is waiting.
int locus_unix_accept(int fd);
/// Connects a SOCK_STREAM socket to `path`.
int locus_unix_connect(const char *path);
/// Sends on a connected socket without blocking and without SIGPIPE (a client that went away
/// is an EPIPE to handle, not a signal that kills the agent). Bytes sent or -errno.
long locus_send(int fd, const void *buffer, size_t count);
/// Sends one datagram to a Unix socket address (path, or "@name" for the abstract namespace),
/// as sd_notify does with $NOTIFY_SOCKET.
int locus_unix_send_datagram(const char *path, const void *buffer, size_t count);

// MARK: access (peer credentials, groups) and socket activation

/// The connected peer's process id, user id and group id (SO_PEERCRED); 0 or -errno.
int locus_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid);
/// The connected peer's supplementary groups (SO_PEERGROUPS), at most `capacity`: the count
/// (-ERANGE when it has more), or -errno (-ENOPROTOOPT on kernels before 4.13).
int locus_peer_groups(int fd, unsigned *gids, int capacity);
/// The id of group `name` (getgrnam_r): 1 found, 0 no such group, -errno.
int locus_group_id(const char *name, unsigned *gid);
/// The name of group `gid` into `name` (getgrgid_r): 1 found, 0 none, -errno.
int locus_group_name(unsigned gid, char *name, size_t capacity);
/// The name of user `uid` into `name` (getpwuid_r): 1 found, 0 none, -errno.
int locus_user_name(unsigned uid, char *name, size_t capacity);
/// The real user id of this process.
unsigned locus_getuid(void);
/// Connects to the Unix stream socket at `path` without blocking and closes the connection at
/// once (the connection itself is the message: systemd starts a socket's service on it).
/// 0 when connected or in progress, -errno otherwise (ENOENT: nothing there, ECONNREFUSED:
/// nobody listens, EAGAIN: its backlog is full).
int locus_unix_touch(const char *path);

// MARK: Bluetooth HCI (BlueZ's kernel interface; libbluetooth is not linked)

/// Opens a raw HCI socket bound to device `index`, non-blocking.
int locus_hci_open(int index);
/// The management interface (HCI_CHANNEL_CONTROL), non-blocking: one mgmt command per write,
/// one event per read. Commands that change an adapter need CAP_NET_ADMIN.
int locus_mgmt_open(void);
/// The monitor channel (HCI_CHANNEL_MONITOR, CAP_NET_RAW), non-blocking: on open the kernel
/// queues a replay of the adapters and of every open HCI socket with its process name.
int locus_hci_monitor_open(void);
/// Brings the adapter up (HCIDEVUP); 0 when it is up already.
int locus_hci_device_up(int socket_fd, int index);
/// Takes the adapter down (HCIDEVDOWN); 0 when it is down already.
int locus_hci_device_down(int socket_fd, int index);
/// Restricts the socket to HCI events: Command Complete, Command Status and LE Meta.
/// The previous filter is saved into `saved` (16 bytes) when non-NULL.
int locus_hci_set_le_filter(int fd, void *saved, size_t saved_size);
int locus_hci_restore_filter(int fd, const void *saved, size_t saved_size);
/// Sends one HCI command (OGF, OCF, parameters) without waiting for its completion.
int locus_hci_send_command(int fd, uint16_t ogf, uint16_t ocf, const void *parameters, uint8_t length);
/// Sends a command and waits (bounded by `timeout_ms`) for its Command Complete; the return
/// parameters (status first) are copied into `reply`. Returns the reply length or -errno.
int locus_hci_request(int fd, uint16_t ogf, uint16_t ocf, const void *parameters, uint8_t length,
                      void *reply, uint8_t reply_capacity, int timeout_ms);
/// 1 when the device flags say the adapter is up, 0 when down, -errno when it is gone.
int locus_hci_device_is_up(int socket_fd, int index);

// MARK: GPIO (libgpiod v1)

typedef struct locus_gpio_chip locus_gpio_chip;
typedef struct locus_gpio_line locus_gpio_line;
/// Opens a chip by name ("gpiochip0"), path ("/dev/gpiochip0"), or label ("pinctrl-bcm2711").
/// NULL on failure with `*error` = errno.
locus_gpio_chip *locus_gpio_chip_open(const char *name_or_label, int by_label, int *error);
void locus_gpio_chip_close(locus_gpio_chip *chip);
const char *locus_gpio_chip_name(locus_gpio_chip *chip);
const char *locus_gpio_chip_label(locus_gpio_chip *chip);
int locus_gpio_chip_line_count(locus_gpio_chip *chip);
enum { LOCUS_GPIO_ACTIVE_LOW = 1, LOCUS_GPIO_BIAS_PULL_UP = 2, LOCUS_GPIO_BIAS_PULL_DOWN = 4, LOCUS_GPIO_BIAS_DISABLE = 8 };
/// Requests line `offset` as an output with consumer "locus" and the given logical value.
locus_gpio_line *locus_gpio_request_output(locus_gpio_chip *chip, unsigned offset, int flags, int value, int *error);
/// Requests line `offset` as an input watching both edges; its event fd is readable on a change.
locus_gpio_line *locus_gpio_request_input(locus_gpio_chip *chip, unsigned offset, int flags, int *error);
int locus_gpio_set(locus_gpio_line *line, int value);
int locus_gpio_get(locus_gpio_line *line);
int locus_gpio_event_fd(locus_gpio_line *line);
/// Reads one edge event: 1 rising, 0 falling, -errno on error.
int locus_gpio_read_event(locus_gpio_line *line);
void locus_gpio_release(locus_gpio_line *line);

// MARK: doctor (one system call each; `locus doctor` decides what the answers mean)

enum { LOCUS_NODE_OTHER = 0, LOCUS_NODE_CHARACTER = 1, LOCUS_NODE_DIRECTORY = 2, LOCUS_NODE_REGULAR = 3 };
/// stat(2) following links: the kind (LOCUS_NODE_*), for a device its number, the permission
/// bits and the group; 0 or -errno.
int locus_stat_node(const char *path, int *kind, unsigned *major, unsigned *minor, unsigned *mode, unsigned *gid);
/// readlink(2) into `target` (NUL-terminated): its length or -errno (-EINVAL: not a link).
int locus_readlink(const char *path, char *target, size_t capacity);
/// adjtimex(2) reading only (modes 0): 1 when the clock is synchronised, 0 when not
/// (STA_UNSYNC set or TIME_ERROR returned), -errno.
int locus_clock_synchronised(void);
/// statvfs(3): bytes an unprivileged user may still write on the file system holding `path`.
int locus_free_bytes(const char *path, int64_t *free_bytes);
/// Opens the GPIO chip at `path` (/dev/gpiochipN) for its label and line count; 0 or -errno.
int locus_gpio_chip_info(const char *path, char *label, size_t capacity, int *line_count);
/// Line `offset` of the chip at `path`: 1 in use (its consumer copied, maybe empty), 0 free, -errno.
int locus_gpio_line_consumer(const char *path, unsigned offset, char *consumer, size_t capacity);
/// Whether HCI adapter `index` is up (HCIGETDEVINFO on an unbound socket): 1, 0, or -errno.
int locus_hci_probe_up(int index);

// MARK: output

/// Large blocks (>= 128 KiB) always come from mmap: their pages cost memory only once touched,
/// and return to the kernel when freed (glibc otherwise raises this threshold as blocks are freed).
void locus_map_large_blocks(void);
/// Returns freed heap pages to the kernel (malloc_trim): start-up's parsing leaves many.
void locus_release_free_memory(void);
/// Heap bytes in use and free inside the heap (mallinfo2), for `locus status`.
void locus_heap_usage(int64_t *in_use, int64_t *free_bytes);
/// 1 when `fd` is a terminal.
int locus_isatty(int fd);
/// Writes all of `count` bytes to fd 1 or 2 (retrying short writes and EINTR); 0 or -errno.
int locus_write_all(int fd, const void *buffer, size_t count);

#ifdef __cplusplus
}
#endif
#endif
