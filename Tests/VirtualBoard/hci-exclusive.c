/* hci-exclusive: holds an adapter through the HCI user channel until killed, as btproxy, a
 * Zephyr host or another BLE stack in user space would. The kernel then refuses every other user
 * of that adapter; `locus doctor` must name this program.
 *
 *   hci-exclusive [INDEX]      (default 0; the adapter must be down)
 *
 * Prints "hci-exclusive: hciN held" once bound. Built static by Scripts/vboard. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BTPROTO_HCI 1
#define HCI_CHANNEL_USER 1
#ifndef AF_BLUETOOTH
#define AF_BLUETOOTH 31
#endif

struct sockaddr_hci {
    sa_family_t hci_family;
    unsigned short hci_dev;
    unsigned short hci_channel;
};

int main(int argc, char **argv) {
    int index = argc > 1 ? atoi(argv[1]) : 0;
    int fd = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI);
    if (fd < 0) {
        fprintf(stderr, "hci-exclusive: socket: %s\n", strerror(errno));
        return 1;
    }
    struct sockaddr_hci address = {AF_BLUETOOTH, (unsigned short)index, HCI_CHANNEL_USER};
    if (bind(fd, (struct sockaddr *)&address, sizeof address) < 0) {
        fprintf(stderr, "hci-exclusive: bind hci%d user channel: %s\n", index, strerror(errno));
        return 1;
    }
    printf("hci-exclusive: hci%d held\n", index);
    fflush(stdout);
    for (;;) pause();
}
