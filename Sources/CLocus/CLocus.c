// See include/CLocus.h. Every function is one system or library call; no policy.
#define _GNU_SOURCE
#include "CLocus.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#ifndef LOCUS_MUSL
#include <malloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/timex.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>   // its inline filter and bit helpers only: libbluetooth is not linked
#include <gpiod.h>

// EINTR retry bound: a signal storm must not turn one call into an unbounded loop.
#define LOCUS_EINTR_RETRIES 8

#define RETRY(expression)                                              \
    ({                                                                 \
        long _result = -1;                                             \
        for (int _try = 0; _try < LOCUS_EINTR_RETRIES; _try++) {       \
            _result = (long)(expression);                              \
            if (!(_result == -1 && errno == EINTR)) break;             \
        }                                                              \
        _result == -1 ? -(long)errno : _result;                        \
    })

// MARK: process

static int captured_argc;
static char **captured_argv;

static void locus_capture_arguments(int argc, char **argv) {
    captured_argc = argc;
    captured_argv = argv;
    // Line-buffered stdout: Embedded `print` goes through putchar, and a technician watching
    // `locus run | tee` must see each line when it is written.
    setvbuf(stdout, NULL, _IOLBF, 0);
}

#ifdef LOCUS_MUSL
// The device build links musl, whose constructors get no arguments. SwiftPM names the Swift
// entry point `locus_main` (and links `main` to it); the device build links `main` to this
// function instead (`--defsym main=locus_device_main`), which keeps the arguments first.
extern int locus_main(int argc, char **argv);

int locus_device_main(int argc, char **argv) {
    locus_capture_arguments(argc, argv);
    return locus_main(argc, argv);
}
#else
// glibc calls constructors with (argc, argv, envp), in static binaries too. Embedded Swift has
// no CommandLine, so both build modes read arguments from here.
__attribute__((constructor)) static void locus_capture_arguments_at_start(int argc, char **argv, char **envp) {
    (void)envp;
    locus_capture_arguments(argc, argv);
}
#endif

int locus_argc(void) { return captured_argc; }

const char *locus_argv(int index) {
    if (index < 0 || index >= captured_argc) return NULL;
    return captured_argv[index];
}

const char *locus_getenv(const char *name) { return getenv(name); }

void locus_exit(int status) {
    fflush(stdout);
    fflush(stderr);
    exit(status);
}

int locus_getpid(void) { return (int)getpid(); }

int locus_kill(int pid, int signal) { return kill(pid, signal) == 0 ? 0 : -errno; }

const char *locus_strerror(int error) {
    const char *text = strerror(error);
    return text ? text : "unknown error";
}

#ifdef LOCUS_EMBEDDED
// The Embedded Swift standard library parses floating-point text through these hooks.
const char *_swift_stdlib_strtod_clocale(const char *nptr, double *outResult) {
    char *end = NULL;
    *outResult = strtod(nptr, &end);
    return end;
}

const char *_swift_stdlib_strtof_clocale(const char *nptr, float *outResult) {
    char *end = NULL;
    *outResult = strtof(nptr, &end);
    return end;
}
#endif

/// Fills `count` bytes from getrandom(2), across interruptions and short reads; -1 when the
/// kernel has none to give.
static int random_fill(void *buffer, size_t count) {
    unsigned char *bytes = buffer;
    while (count > 0) {
        ssize_t got = getrandom(bytes, count, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        bytes += got;
        count -= (size_t)got;
    }
    return 0;
}

#ifdef LOCUS_MUSL
// MARK: musl: what Debian's glibc-built libgpiod.a and the Embedded runtime expect

#include <ctype.h>
#include <stdarg.h>

// Dictionary and Set seed their hashing from this; musl 1.2.3 does not have it.
void arc4random_buf(void *buffer, size_t count) {
    if (random_fill(buffer, count) < 0) abort();   // no randomness at all: nothing sensible to go on with
}

// glibc's fortified printf entry points, as libgpiod.a calls them.
int __snprintf_chk(char *buffer, size_t size, int flag, size_t available, const char *format, ...) {
    (void)flag;
    if (size > available) abort();
    va_list arguments;
    va_start(arguments, format);
    int result = vsnprintf(buffer, size, format, arguments);
    va_end(arguments);
    return result;
}

int __asprintf_chk(char **result, int flag, const char *format, ...) {
    (void)flag;
    va_list arguments;
    va_start(arguments, format);
    int length = vasprintf(result, format, arguments);
    va_end(arguments);
    return length;
}

// glibc's ctype table (isdigit() and friends expand to it in glibc's headers): 384 entries from
// -128, the C locale's classes in glibc's bit layout, built from musl's own classification.
static unsigned short locus_ctype_table[384];
static const unsigned short *locus_ctype_pointer;

static unsigned short locus_ctype_bit(int bit) {   // glibc's _ISbit on a little-endian machine
    return (unsigned short)(bit < 8 ? ((1 << bit) << 8) : ((1 << bit) >> 8));
}

const unsigned short **__ctype_b_loc(void) {
    if (!locus_ctype_pointer) {
        for (int c = 0; c < 256; c++) {
            unsigned short mask = 0;
            if (isupper(c)) mask |= locus_ctype_bit(0);
            if (islower(c)) mask |= locus_ctype_bit(1);
            if (isalpha(c)) mask |= locus_ctype_bit(2);
            if (isdigit(c)) mask |= locus_ctype_bit(3);
            if (isxdigit(c)) mask |= locus_ctype_bit(4);
            if (isspace(c)) mask |= locus_ctype_bit(5);
            if (isprint(c)) mask |= locus_ctype_bit(6);
            if (isgraph(c)) mask |= locus_ctype_bit(7);
            if (isblank(c)) mask |= locus_ctype_bit(8);
            if (iscntrl(c)) mask |= locus_ctype_bit(9);
            if (ispunct(c)) mask |= locus_ctype_bit(10);
            if (isalnum(c)) mask |= locus_ctype_bit(11);
            locus_ctype_table[128 + c] = mask;
        }
        locus_ctype_pointer = locus_ctype_table + 128;
    }
    return &locus_ctype_pointer;
}
#endif

// MARK: the kernel seam (CLocusKernel.h)

static locus_kernel_hooks kernel_hooks;
static int kernel_hooked;

void locus_kernel_install(const locus_kernel_hooks *hooks) {
    if (hooks) {
        kernel_hooks = *hooks;
        kernel_hooked = 1;
    } else {
        memset(&kernel_hooks, 0, sizeof kernel_hooks);
        kernel_hooked = 0;
    }
}

/// A simulated kernel answers this descriptor.
#define SIMULATED(fd) (kernel_hooked && (fd) >= LOCUS_SIM_FD_BASE)

// MARK: file descriptors

int locus_open(const char *path, int flags, int mode) {
    // O_NOCTTY: opening a terminal (a pseudo-terminal's slave) never makes it ours.
    int os = O_CLOEXEC | O_NOCTTY;
    if ((flags & LOCUS_O_READ) && (flags & LOCUS_O_WRITE)) os |= O_RDWR;
    else if (flags & LOCUS_O_WRITE) os |= O_WRONLY;
    else os |= O_RDONLY;
    if (flags & LOCUS_O_CREATE) os |= O_CREAT;
    if (flags & LOCUS_O_TRUNCATE) os |= O_TRUNC;
    if (flags & LOCUS_O_APPEND) os |= O_APPEND;
    if (flags & LOCUS_O_NONBLOCK) os |= O_NONBLOCK;
    if (flags & LOCUS_O_EXCLUSIVE) os |= O_EXCL;
    if (flags & LOCUS_O_DIRECTORY) os |= O_DIRECTORY;
    return (int)RETRY(open(path, os, (mode_t)mode));
}

int locus_mkfifo(const char *path, int mode) { return mkfifo(path, (mode_t)mode) == 0 ? 0 : -errno; }

int locus_close(int fd) {
    if (SIMULATED(fd)) return kernel_hooks.close(fd);
    // close(2) must not be retried on EINTR on Linux: the descriptor is gone either way.
    return close(fd) == 0 ? 0 : -errno;
}

int locus_dup(int fd) {
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return copy >= 0 ? copy : -errno;
}

long locus_read(int fd, void *buffer, size_t count) {
    if (SIMULATED(fd)) return kernel_hooks.read(fd, buffer, count);
    return RETRY(read(fd, buffer, count));
}

long locus_write(int fd, const void *buffer, size_t count) {
    if (SIMULATED(fd)) return kernel_hooks.write(fd, buffer, count);
    if (kernel_hooked && kernel_hooks.disk_write) {
        long simulated = kernel_hooks.disk_write(fd, buffer, count);
        if (simulated != LOCUS_KERNEL_PASS) return simulated;
    }
    return RETRY(write(fd, buffer, count));
}

long locus_pread(int fd, void *buffer, size_t count, int64_t offset) {
    return RETRY(pread(fd, buffer, count, (off_t)offset));
}

/// A simulated disk's answer to a sync, or LOCUS_KERNEL_PASS.
static int simulated_sync(int fd) {
    return kernel_hooked && kernel_hooks.disk_sync ? kernel_hooks.disk_sync(fd) : LOCUS_KERNEL_PASS;
}

int locus_fsync(int fd) {
    int simulated = simulated_sync(fd);
    return simulated != LOCUS_KERNEL_PASS ? simulated : (int)RETRY(fsync(fd));
}

int locus_fdatasync(int fd) {
    int simulated = simulated_sync(fd);
    return simulated != LOCUS_KERNEL_PASS ? simulated : (int)RETRY(fdatasync(fd));
}

int locus_kernel_fdatasync(int fd) { return (int)RETRY(fdatasync(fd)); }

int locus_ftruncate(int fd, int64_t length) { return (int)RETRY(ftruncate(fd, (off_t)length)); }

int64_t locus_lseek(int fd, int64_t offset, int whence) {
    off_t result = lseek(fd, (off_t)offset, whence);
    return result < 0 ? -(int64_t)errno : (int64_t)result;
}

int64_t locus_file_size(int fd) {
    struct stat info;
    if (fstat(fd, &info) != 0) return -(int64_t)errno;
    return (int64_t)info.st_size;
}

int locus_mkdir(const char *path, int mode) { return mkdir(path, (mode_t)mode) == 0 ? 0 : -errno; }

int locus_chmod(const char *path, int mode) { return chmod(path, (mode_t)mode) == 0 ? 0 : -errno; }

int locus_unlink(const char *path) { return unlink(path) == 0 ? 0 : -errno; }

int locus_rename(const char *from, const char *to) { return rename(from, to) == 0 ? 0 : -errno; }

int locus_lock_exclusive(int fd) { return (int)RETRY(flock(fd, LOCK_EX | LOCK_NB)); }

void *locus_map_readonly(int fd, int64_t size, int *error) {
    void *address = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) { *error = -errno; return NULL; }
    *error = 0;
    return address;
}

int locus_unmap(void *address, int64_t size) { return munmap(address, (size_t)size) == 0 ? 0 : -errno; }

int locus_is_directory(const char *path) {
    struct stat info;
    if (stat(path, &info) != 0) return -errno;
    return S_ISDIR(info.st_mode) ? 1 : 0;
}

int locus_file_mode(const char *path, uint32_t *owner) {
    struct stat info;
    if (stat(path, &info) != 0) return -errno;
    *owner = (uint32_t)info.st_uid;
    return (int)(info.st_mode & 07777);
}

int locus_make_temporary_directory(char *template_path) { return mkdtemp(template_path) ? 0 : -errno; }

static int remove_entry(const char *path, const struct stat *status, int kind, struct FTW *walk) {
    (void)status; (void)kind; (void)walk;
    return remove(path) == 0 ? 0 : -errno;
}

int locus_remove_tree(const char *path) {
    int result = nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return result == -1 ? -errno : result;
}

int locus_list_directory(const char *path, void (*visit)(const char *name, void *context), void *context) {
    DIR *directory = opendir(path);
    if (!directory) return -errno;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        visit(entry->d_name, context);
        count++;
    }
    closedir(directory);
    return count;
}

// MARK: time

static int64_t clock_ns(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

int64_t locus_monotonic_ns(void) { return kernel_hooked ? kernel_hooks.monotonic_ns() : clock_ns(CLOCK_MONOTONIC); }

int64_t locus_kernel_monotonic_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

int64_t locus_realtime_ns(void) { return kernel_hooked ? kernel_hooks.realtime_ns() : clock_ns(CLOCK_REALTIME); }

uint64_t locus_random64(void) {
    if (kernel_hooked && kernel_hooks.random64) return kernel_hooks.random64();
    uint64_t value = 0;
    if (random_fill(&value, sizeof value) < 0) return (uint64_t)clock_ns(CLOCK_MONOTONIC) * 0x9E3779B97F4A7C15ull;   // a spread, not a secret
    return value;
}

// MARK: poll loop primitives

// The fixed poll set is small (UART, HCI, control socket and clients, timers, signals); a larger
// request is a programmer error reported as EINVAL rather than a stack overflow.
#define LOCUS_POLL_MAX 64

int locus_poll(const int *fds, const short *events, short *revents, int count, int timeout_ms) {
    if (kernel_hooked) return kernel_hooks.poll(fds, events, revents, count, timeout_ms);
    return locus_kernel_poll(fds, events, revents, count, timeout_ms);
}

int locus_kernel_poll(const int *fds, const short *events, short *revents, int count, int timeout_ms) {
    if (count < 0 || count > LOCUS_POLL_MAX) return -EINVAL;
    struct pollfd set[LOCUS_POLL_MAX];
    for (int i = 0; i < count; i++) {
        set[i].fd = fds[i];
        set[i].events = (short)(((events[i] & LOCUS_POLLIN) ? POLLIN : 0) | ((events[i] & LOCUS_POLLOUT) ? POLLOUT : 0));
        set[i].revents = 0;
    }
    int ready = poll(set, (nfds_t)count, timeout_ms);
    if (ready < 0) return -errno;
    for (int i = 0; i < count; i++) {
        short r = set[i].revents;
        revents[i] = (short)(((r & POLLIN) ? LOCUS_POLLIN : 0) | ((r & POLLOUT) ? LOCUS_POLLOUT : 0) |
                             ((r & POLLERR) ? LOCUS_POLLERR : 0) | ((r & POLLHUP) ? LOCUS_POLLHUP : 0) |
                             ((r & POLLNVAL) ? LOCUS_POLLNVAL : 0));
    }
    return ready;
}

int locus_timerfd_create(void) {
    if (kernel_hooked) return kernel_hooks.timerfd_create();
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int locus_timerfd_arm(int fd, int64_t delay_ns) {
    if (SIMULATED(fd)) return kernel_hooks.timerfd_arm(fd, delay_ns);
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    if (delay_ns > 0) {
        spec.it_value.tv_sec = (time_t)(delay_ns / 1000000000);
        spec.it_value.tv_nsec = (long)(delay_ns % 1000000000);
    }
    return timerfd_settime(fd, 0, &spec, NULL) == 0 ? 0 : -errno;
}

int locus_signalfd_create(void) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0) return -errno;
    int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int locus_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    long n = RETRY(read(fd, &info, sizeof info));
    if (n == -EAGAIN) return 0;
    if (n < 0) return (int)n;
    if (n != (long)sizeof info) return -EIO;
    return (int)info.ssi_signo;
}

// MARK: UART

static speed_t baud_constant(int baud) {
    switch (baud) {
    case 1200: return B1200;
    case 2400: return B2400;
    case 4800: return B4800;
    case 9600: return B9600;
    case 19200: return B19200;
    case 38400: return B38400;
    case 57600: return B57600;
    case 115200: return B115200;
    case 230400: return B230400;
    case 460800: return B460800;
    case 921600: return B921600;
    default: return 0;
    }
}

int locus_uart_baud_supported(int baud) { return baud_constant(baud) != 0; }

int locus_uart_open(const char *path, int baud) {
    if (kernel_hooked) {
        int simulated = kernel_hooks.uart_open(path, baud);
        if (simulated != LOCUS_KERNEL_PASS) return simulated;
    }
    speed_t speed = baud_constant(baud);
    if (speed == 0) return -EINVAL;
    int fd = (int)RETRY(open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
    if (fd < 0) return fd;
    struct termios tio;
    if (tcgetattr(fd, &tio) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    cfmakeraw(&tio);
    tio.c_cflag &= ~(CSTOPB | PARENB | CRTSCTS | CSIZE);
    tio.c_cflag |= CS8 | CLOCAL | CREAD;
    // VMIN 1 with O_NONBLOCK: no data reads as EAGAIN, so a read of 0 bytes means hang-up.
    // (VMIN 0 would make an idle port read 0 bytes, indistinguishable from an unplugged one.)
    tio.c_cc[VMIN] = 1;
    tio.c_cc[VTIME] = 0;
    cfsetispeed(&tio, speed);
    cfsetospeed(&tio, speed);
    if (tcsetattr(fd, TCSANOW, &tio) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    tcflush(fd, TCIFLUSH);
    return fd;
}

int locus_pty_open(char *slave_path, size_t capacity) {
    int fd = posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct termios tio;
    if (grantpt(fd) != 0 || unlockpt(fd) != 0 || ptsname_r(fd, slave_path, capacity) != 0 || tcgetattr(fd, &tio) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    // Raw on both sides: no echo flowing back into the master, no line editing of NMEA.
    cfmakeraw(&tio);
    if (tcsetattr(fd, TCSANOW, &tio) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int locus_symlink(const char *target, const char *path) {
    unlink(path);
    return symlink(target, path) == 0 ? 0 : -errno;
}

// MARK: Unix sockets

static int fill_unix_address(struct sockaddr_un *address, const char *path, socklen_t *length) {
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof address->sun_path) return -ENAMETOOLONG;
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    memcpy(address->sun_path, path, n);
    if (path[0] == '@') address->sun_path[0] = '\0'; // abstract namespace, as systemd uses
    *length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    return 0;
}

int locus_unix_listen(const char *path, int backlog) {
    struct sockaddr_un address;
    socklen_t length;
    int status = fill_unix_address(&address, path, &length);
    if (status < 0) return status;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (path[0] != '@') unlink(path);
    if (bind(fd, (struct sockaddr *)&address, length) != 0 || listen(fd, backlog) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

long locus_send(int fd, const void *buffer, size_t count) {
    return RETRY(send(fd, buffer, count, MSG_NOSIGNAL | MSG_DONTWAIT));
}

int locus_unix_accept(int fd) {
    int client = (int)RETRY(accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
    return client;
}

int locus_unix_connect(const char *path) {
    struct sockaddr_un address;
    socklen_t length;
    int status = fill_unix_address(&address, path, &length);
    if (status < 0) return status;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (RETRY(connect(fd, (struct sockaddr *)&address, length)) < 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int locus_unix_send_datagram(const char *path, const void *buffer, size_t count) {
    struct sockaddr_un address;
    socklen_t length;
    int status = fill_unix_address(&address, path, &length);
    if (status < 0) return status;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    long sent = RETRY(sendto(fd, buffer, count, MSG_NOSIGNAL, (struct sockaddr *)&address, length));
    close(fd);
    return sent < 0 ? (int)sent : 0;
}

// MARK: access and socket activation

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

int locus_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -errno;
    *pid = (int)credentials.pid;
    *uid = (unsigned)credentials.uid;
    *gid = (unsigned)credentials.gid;
    return 0;
}

int locus_peer_groups(int fd, unsigned *gids, int capacity) {
    socklen_t length = (socklen_t)(sizeof(gid_t) * (size_t)capacity);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gids, &length) != 0) return -errno;
    return (int)(length / sizeof(gid_t));
}

int locus_group_id(const char *name, unsigned *gid) {
    struct group entry, *found = NULL;
    char buffer[4096];
    int error = getgrnam_r(name, &entry, buffer, sizeof buffer, &found);
    if (error != 0) return -error;
    if (found == NULL) return 0;
    *gid = (unsigned)found->gr_gid;
    return 1;
}

int locus_group_name(unsigned gid, char *name, size_t capacity) {
    struct group entry, *found = NULL;
    char buffer[4096];
    int error = getgrgid_r((gid_t)gid, &entry, buffer, sizeof buffer, &found);
    if (error != 0) return -error;
    if (found == NULL || capacity == 0) return 0;
    snprintf(name, capacity, "%s", found->gr_name);
    return 1;
}

int locus_user_name(unsigned uid, char *name, size_t capacity) {
    struct passwd entry, *found = NULL;
    char buffer[4096];
    int error = getpwuid_r((uid_t)uid, &entry, buffer, sizeof buffer, &found);
    if (error != 0) return -error;
    if (found == NULL || capacity == 0) return 0;
    snprintf(name, capacity, "%s", found->pw_name);
    return 1;
}

unsigned locus_getuid(void) { return (unsigned)getuid(); }

int locus_unix_touch(const char *path) {
    struct sockaddr_un address;
    socklen_t length;
    int status = fill_unix_address(&address, path, &length);
    if (status < 0) return status;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int result = 0;
    if (RETRY(connect(fd, (struct sockaddr *)&address, length)) < 0 && errno != EINPROGRESS) result = -errno;
    close(fd);
    return result;
}

// MARK: Bluetooth HCI

// The raw HCI socket is opened here with BlueZ's kernel interface (its headers), as BlueZ's
// hci_open_dev does, so libbluetooth itself is not linked.
static int hci_channel_open(unsigned short index, unsigned short channel) {
    int fd = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, BTPROTO_HCI);
    if (fd < 0) return -errno;
    struct sockaddr_hci address;
    memset(&address, 0, sizeof address);
    address.hci_family = AF_BLUETOOTH;
    address.hci_dev = index;
    address.hci_channel = channel;
    if (bind(fd, (struct sockaddr *)&address, sizeof address) < 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int locus_hci_open(int index) { return hci_channel_open((unsigned short)index, HCI_CHANNEL_RAW); }

// mgmt and the monitor channel are bound to no adapter (HCI_DEV_NONE): mgmt commands name their
// adapter in each header, and the monitor reports every adapter.
int locus_mgmt_open(void) { return hci_channel_open(HCI_DEV_NONE, HCI_CHANNEL_CONTROL); }
int locus_hci_monitor_open(void) { return hci_channel_open(HCI_DEV_NONE, HCI_CHANNEL_MONITOR); }

int locus_hci_device_up(int socket_fd, int index) {
    if (ioctl(socket_fd, HCIDEVUP, index) == 0) return 0;
    return errno == EALREADY ? 0 : -errno;
}

int locus_hci_device_down(int socket_fd, int index) {
    if (ioctl(socket_fd, HCIDEVDOWN, index) == 0) return 0;
    return errno == EALREADY ? 0 : -errno;
}

int locus_hci_device_is_up(int socket_fd, int index) {
    struct hci_dev_info info;
    memset(&info, 0, sizeof info);
    info.dev_id = (uint16_t)index;
    if (ioctl(socket_fd, HCIGETDEVINFO, (void *)&info) != 0) return -errno;
    return hci_test_bit(HCI_UP, &info.flags) ? 1 : 0;
}

int locus_hci_set_le_filter(int fd, void *saved, size_t saved_size) {
    if (saved) {
        if (saved_size < sizeof(struct hci_filter)) return -EINVAL;
        socklen_t length = sizeof(struct hci_filter);
        if (getsockopt(fd, SOL_HCI, HCI_FILTER, saved, &length) != 0) return -errno;
    }
    struct hci_filter filter;
    hci_filter_clear(&filter);
    hci_filter_set_ptype(HCI_EVENT_PKT, &filter);
    hci_filter_set_event(EVT_LE_META_EVENT, &filter);
    hci_filter_set_event(EVT_CMD_COMPLETE, &filter);
    hci_filter_set_event(EVT_CMD_STATUS, &filter);
    // The kernel's own "device down" notification, so an adapter going down is seen at once.
    hci_filter_set_event(EVT_STACK_INTERNAL, &filter);
    return setsockopt(fd, SOL_HCI, HCI_FILTER, &filter, sizeof filter) == 0 ? 0 : -errno;
}

int locus_hci_restore_filter(int fd, const void *saved, size_t saved_size) {
    if (saved_size < sizeof(struct hci_filter)) return -EINVAL;
    return setsockopt(fd, SOL_HCI, HCI_FILTER, saved, sizeof(struct hci_filter)) == 0 ? 0 : -errno;
}

int locus_hci_send_command(int fd, uint16_t ogf, uint16_t ocf, const void *parameters, uint8_t length) {
    // An HCI command packet: type, opcode (little-endian: OCF in the low 10 bits), length, parameters.
    uint8_t packet[4 + 255];
    uint16_t opcode = (uint16_t)((ogf << 10) | (ocf & 0x03ff));
    packet[0] = HCI_COMMAND_PKT;
    packet[1] = (uint8_t)(opcode & 0xff);
    packet[2] = (uint8_t)(opcode >> 8);
    packet[3] = length;
    if (length) memcpy(packet + 4, parameters, length);
    long written = RETRY(write(fd, packet, 4u + length));
    if (written < 0) return (int)written;
    return written == 4 + length ? 0 : -EIO;
}

// Sends a command and waits (at most timeout_ms) for its Command Complete, whose return
// parameters are copied into reply; a Command Status with an error fails with EIO. The socket's
// event filter is narrowed to the answer while waiting and restored after.
int locus_hci_request(int fd, uint16_t ogf, uint16_t ocf, const void *parameters, uint8_t length,
                      void *reply, uint8_t reply_capacity, int timeout_ms) {
    struct hci_filter saved, filter;
    socklen_t saved_length = sizeof saved;
    if (getsockopt(fd, SOL_HCI, HCI_FILTER, &saved, &saved_length) < 0) return -errno;
    uint16_t opcode = (uint16_t)((ogf << 10) | (ocf & 0x03ff));
    hci_filter_clear(&filter);
    hci_filter_set_ptype(HCI_EVENT_PKT, &filter);
    hci_filter_set_event(EVT_CMD_STATUS, &filter);
    hci_filter_set_event(EVT_CMD_COMPLETE, &filter);
    hci_filter_set_opcode(htobs(opcode), &filter);
    if (setsockopt(fd, SOL_HCI, HCI_FILTER, &filter, sizeof filter) < 0) return -errno;

    int result = locus_hci_send_command(fd, ogf, ocf, parameters, length);
    int64_t deadline = locus_monotonic_ns() + (int64_t)timeout_ms * 1000000;
    // Bounded: each pass reads one event or waits out the rest of the time.
    for (int pass = 0; result == 0 && pass < 64; pass++) {
        int64_t left_ms = (deadline - locus_monotonic_ns()) / 1000000;
        if (left_ms <= 0) { result = -ETIMEDOUT; break; }
        struct pollfd waiting = { .fd = fd, .events = POLLIN };
        int ready = poll(&waiting, 1, (int)left_ms);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) { result = -errno; break; }
        if (ready == 0) { result = -ETIMEDOUT; break; }
        uint8_t event[3 + 255];
        long count = RETRY(read(fd, event, sizeof event));
        if (count == -EAGAIN) continue;
        if (count < 0) { result = (int)count; break; }
        if (count < 3 || event[0] != HCI_EVENT_PKT || count < 3 + event[2]) continue;
        const uint8_t *body = event + 3;
        uint8_t body_length = event[2];
        if (event[1] == EVT_CMD_STATUS && body_length >= 4 && (body[2] | body[3] << 8) == opcode) {
            if (body[0] != 0) result = -EIO;
            continue;   // a pending command: its Command Complete follows
        }
        if (event[1] == EVT_CMD_COMPLETE && body_length >= 3 && (body[1] | body[2] << 8) == opcode) {
            uint8_t returned = (uint8_t)(body_length - 3);
            uint8_t copied = returned < reply_capacity ? returned : reply_capacity;
            if (copied) memcpy(reply, body + 3, copied);
            setsockopt(fd, SOL_HCI, HCI_FILTER, &saved, sizeof saved);
            return copied;
        }
    }
    if (result == 0) result = -ETIMEDOUT;
    setsockopt(fd, SOL_HCI, HCI_FILTER, &saved, sizeof saved);
    return result;
}

// MARK: GPIO (libgpiod v1)

struct locus_gpio_chip { struct gpiod_chip *chip; };
struct locus_gpio_line { struct gpiod_line *line; };

locus_gpio_chip *locus_gpio_chip_open(const char *name_or_label, int by_label, int *error) {
    errno = 0;
    struct gpiod_chip *chip = by_label ? gpiod_chip_open_by_label(name_or_label) : gpiod_chip_open_lookup(name_or_label);
    if (!chip) {
        *error = errno ? errno : ENODEV;
        return NULL;
    }
    locus_gpio_chip *wrapper = malloc(sizeof *wrapper);
    if (!wrapper) {
        gpiod_chip_close(chip);
        *error = ENOMEM;
        return NULL;
    }
    wrapper->chip = chip;
    return wrapper;
}

void locus_gpio_chip_close(locus_gpio_chip *chip) {
    if (!chip) return;
    gpiod_chip_close(chip->chip);
    free(chip);
}

const char *locus_gpio_chip_name(locus_gpio_chip *chip) { return gpiod_chip_name(chip->chip); }

const char *locus_gpio_chip_label(locus_gpio_chip *chip) { return gpiod_chip_label(chip->chip); }

int locus_gpio_chip_line_count(locus_gpio_chip *chip) { return (int)gpiod_chip_num_lines(chip->chip); }

static int request_flags(int flags) {
    int result = 0;
    if (flags & LOCUS_GPIO_ACTIVE_LOW) result |= GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW;
    if (flags & LOCUS_GPIO_BIAS_PULL_UP) result |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP;
    if (flags & LOCUS_GPIO_BIAS_PULL_DOWN) result |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN;
    if (flags & LOCUS_GPIO_BIAS_DISABLE) result |= GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE;
    return result;
}

static locus_gpio_line *wrap_line(struct gpiod_line *line, int *error) {
    locus_gpio_line *wrapper = malloc(sizeof *wrapper);
    if (!wrapper) {
        gpiod_line_release(line);
        *error = ENOMEM;
        return NULL;
    }
    wrapper->line = line;
    return wrapper;
}

locus_gpio_line *locus_gpio_request_output(locus_gpio_chip *chip, unsigned offset, int flags, int value, int *error) {
    errno = 0;
    struct gpiod_line *line = gpiod_chip_get_line(chip->chip, offset);
    if (!line || gpiod_line_request_output_flags(line, "locus", request_flags(flags), value) != 0) {
        *error = errno ? errno : EINVAL;
        return NULL;
    }
    return wrap_line(line, error);
}

locus_gpio_line *locus_gpio_request_input(locus_gpio_chip *chip, unsigned offset, int flags, int *error) {
    errno = 0;
    struct gpiod_line *line = gpiod_chip_get_line(chip->chip, offset);
    if (!line || gpiod_line_request_both_edges_events_flags(line, "locus", request_flags(flags)) != 0) {
        *error = errno ? errno : EINVAL;
        return NULL;
    }
    return wrap_line(line, error);
}

int locus_gpio_set(locus_gpio_line *line, int value) { return gpiod_line_set_value(line->line, value) == 0 ? 0 : -errno; }

int locus_gpio_get(locus_gpio_line *line) {
    int value = gpiod_line_get_value(line->line);
    return value < 0 ? -errno : value;
}

int locus_gpio_event_fd(locus_gpio_line *line) {
    int fd = gpiod_line_event_get_fd(line->line);
    return fd < 0 ? -errno : fd;
}

int locus_gpio_read_event(locus_gpio_line *line) {
    struct gpiod_line_event event;
    if (gpiod_line_event_read(line->line, &event) != 0) return -errno;
    return event.event_type == GPIOD_LINE_EVENT_RISING_EDGE ? 1 : 0;
}

void locus_gpio_release(locus_gpio_line *line) {
    if (!line) return;
    gpiod_line_release(line->line);
    free(line);
}

// MARK: output

int locus_isatty(int fd) { return isatty(fd); }

#ifdef LOCUS_MUSL
// musl's allocator maps large blocks by itself and gives freed pages back as it goes.
void locus_map_large_blocks(void) {}

void locus_release_free_memory(void) {}
#else
void locus_map_large_blocks(void) { mallopt(M_MMAP_THRESHOLD, 128 * 1024); }

void locus_release_free_memory(void) { malloc_trim(0); }
#endif

void locus_heap_usage(int64_t *in_use, int64_t *free_bytes) {
#ifdef LOCUS_MUSL
    // musl keeps no such statistics; -1 says "unknown".
    *in_use = -1;
    *free_bytes = -1;
#else
    struct mallinfo2 info = mallinfo2();
    *in_use = (int64_t)(info.uordblks + info.hblkhd);
    *free_bytes = (int64_t)info.fordblks;
#endif
}

int locus_write_all(int fd, const void *buffer, size_t count) {
    if (fd == 1) fflush(stdout);
    const char *cursor = buffer;
    size_t left = count;
    // Bounded: each successful write makes progress; a zero-byte write is treated as EIO.
    while (left > 0) {
        long n = RETRY(write(fd, cursor, left));
        if (n < 0) return (int)n;
        if (n == 0) return -EIO;
        cursor += n;
        left -= (size_t)n;
    }
    return 0;
}

// MARK: doctor

int locus_stat_node(const char *path, int *kind, unsigned *major_number, unsigned *minor_number, unsigned *mode, unsigned *gid) {
    struct stat info;
    if (stat(path, &info) != 0) return -errno;
    *kind = S_ISCHR(info.st_mode) ? LOCUS_NODE_CHARACTER : S_ISDIR(info.st_mode) ? LOCUS_NODE_DIRECTORY
          : S_ISREG(info.st_mode) ? LOCUS_NODE_REGULAR : LOCUS_NODE_OTHER;
    *major_number = major(info.st_rdev);
    *minor_number = minor(info.st_rdev);
    *mode = info.st_mode & 07777;
    *gid = info.st_gid;
    return 0;
}

int locus_readlink(const char *path, char *target, size_t capacity) {
    if (capacity == 0) return -EINVAL;
    ssize_t length = readlink(path, target, capacity - 1);
    if (length < 0) return -errno;
    target[length] = 0;
    return (int)length;
}

int locus_clock_synchronised(void) {
    struct timex state;
    memset(&state, 0, sizeof state);
    int result = adjtimex(&state);
    if (result < 0) return -errno;
    return (result == TIME_ERROR || (state.status & STA_UNSYNC)) ? 0 : 1;
}

int locus_free_bytes(const char *path, int64_t *free_bytes) {
    struct statvfs info;
    if (statvfs(path, &info) != 0) return -errno;
    *free_bytes = (int64_t)info.f_bavail * (int64_t)info.f_frsize;
    return 0;
}

int locus_gpio_chip_info(const char *path, char *label, size_t capacity, int *line_count) {
    errno = 0;
    struct gpiod_chip *chip = gpiod_chip_open(path);
    if (!chip) return errno ? -errno : -ENODEV;
    snprintf(label, capacity, "%s", gpiod_chip_label(chip));
    *line_count = (int)gpiod_chip_num_lines(chip);
    gpiod_chip_close(chip);
    return 0;
}

int locus_gpio_line_consumer(const char *path, unsigned offset, char *consumer, size_t capacity) {
    errno = 0;
    struct gpiod_chip *chip = gpiod_chip_open(path);
    if (!chip) return errno ? -errno : -ENODEV;
    struct gpiod_line *line = gpiod_chip_get_line(chip, offset);
    int result = -EINVAL;
    if (line) {
        const char *name = gpiod_line_consumer(line);
        snprintf(consumer, capacity, "%s", name ? name : "");
        result = gpiod_line_is_used(line) ? 1 : 0;
    }
    gpiod_chip_close(chip);
    return result;
}

int locus_hci_probe_up(int index) {
    int fd = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI);
    if (fd < 0) return -errno;
    int result = locus_hci_device_is_up(fd, index);
    close(fd);
    return result;
}
