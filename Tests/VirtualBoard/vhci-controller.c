/*
 * vhci-controller: a virtual Bluetooth LE controller on /dev/vhci for the virtual board.
 *
 *   vhci-controller [-x] [-c CONTROL] [-p POWER] SCHEDULE
 *
 * Creates an LE-only primary controller (hciN; the index is printed as "vhci: hciN" on stdout),
 * answers every HCI command with a Command Complete of status 0 and return parameters of the
 * size the command defines, and while the host has scanning enabled injects LE Advertising
 * Reports from SCHEDULE. Without -x it claims only the legacy scan commands, so the host scans
 * with LE Set Scan Enable and gets LE Advertising Reports (subevent 0x02); with -x it also claims
 * LE Set Extended Scan Parameters/Enable (Supported Commands octet 37 bits 5 and 6), and a host
 * that scans with those gets LE Extended Advertising Reports (subevent 0x0D).
 *
 * SCHEDULE: one advertiser per line, '#' starts a comment:
 *
 *   FROM_MS TO_MS EVERY_MS ADDRESS RSSI PAYLOAD
 *   0 20000 500 6A:6B:C9:A2:3E:43 -77 02011a1aff4c000215e2c56db5dffb48d2b060d0f5a71096e000640000c5
 *
 * sends a report every EVERY_MS from FROM_MS until before TO_MS, counted from the moment the host
 * first enables scanning. ADDRESS is a random device address written most significant octet
 * first, RSSI in dBm, PAYLOAD the advertising data (AD structures) in hex, at most 31 octets.
 * A report that falls due while scanning is off is dropped, as a real controller would; one line is
 * printed on stdout per report sent, and "vhci: scanning on|off (legacy|extended)" on changes;
 * taking the adapter down turns scanning off.
 * Advertising commands are logged, for the agent's own beacon: "vhci: advertising parameters
 * interval MIN MAX type T own O channels C" (LE Set Advertising Parameters) or "vhci: extended
 * advertising parameters handle H properties 0xPPPP interval MIN MAX channels C own O" (LE Set
 * Extended Advertising Parameters), "vhci: advertising data N HEX" with " (extended, handle H)"
 * for the extended command (only the N significant octets), and "vhci: advertising on|off" or
 * "vhci: advertising on|off (extended, handle H)" on every enable command; an HCI Reset or a power
 * cut while advertising prints "vhci: advertising off (reset)" / "(power off)".
 * The controller runs until killed or the host side closes.
 *
 * Faults, for the agent's self-healing: -c CONTROL names a file whose first word sets the fault
 * when it changes (read every 50 ms): "mute" (a hung controller: no command is answered, "vhci:
 * ignored 0xOPCODE", and no report sent),
 * "deaf" (commands answered, no report sent), "deaf-until-reset" (deaf until an HCI Reset, as a
 * controller whose radio needs a reset), "ok". -p POWER names a file holding 0 or 1, the level of
 * the board line that powers the controller (gpio-sim's sim_gpioN/value), read every 50 ms: on 0
 * the controller goes away (/dev/vhci closed: the kernel removes the adapter; "vhci: power off"),
 * on 1 it comes back as a new controller with every fault cleared ("vhci: power on").
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { advertisers_max = 16, payload_max = 31, packet_max = 260 };

struct advertiser {
    long from_ms, to_ms, every_ms, next_ms;
    uint8_t address[6];     /* little-endian, as on the wire */
    int8_t rssi;
    uint8_t payload[payload_max];
    int payload_size;
};

static struct advertiser advertisers[advertisers_max];
static int advertiser_count;
static int fd;
static int scanning, scanning_extended, claims_extended, advertising;
static long scan_started_ms = -1;
enum fault { fault_none, fault_mute, fault_deaf, fault_deaf_until_reset };
static enum fault fault;
static const char *control_path, *power_path;
static char control_word[32];
static int powered = 1;

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void die(const char *what) {
    fprintf(stderr, "vhci-controller: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void read_schedule(const char *path) {
    FILE *file = fopen(path, "r");
    if (!file) die(path);
    char line[256];
    int number = 0;
    while (fgets(line, sizeof line, file)) {
        number++;
        char *comment = strchr(line, '#');
        if (comment) *comment = 0;
        struct advertiser a = {0};
        unsigned octets[6];
        int rssi;
        char hex[2 * payload_max + 2];
        int fields = sscanf(line, "%ld %ld %ld %x:%x:%x:%x:%x:%x %d %64s", &a.from_ms, &a.to_ms, &a.every_ms,
                            &octets[0], &octets[1], &octets[2], &octets[3], &octets[4], &octets[5], &rssi, hex);
        if (fields <= 0) continue;
        int size = fields == 11 ? (int)strlen(hex) : -1;
        if (size < 0 || size % 2 || size / 2 > payload_max || a.every_ms <= 0 || rssi < -127 || rssi > 20
            || advertiser_count == advertisers_max) {
            fprintf(stderr, "vhci-controller: %s:%d: expected FROM_MS TO_MS EVERY_MS ADDRESS RSSI PAYLOAD\n", path, number);
            exit(2);
        }
        for (int i = 0; i < 6; i++) a.address[i] = (uint8_t)octets[5 - i];
        for (int i = 0; i < size / 2; i++) {
            int high = hex_value(hex[2 * i]), low = hex_value(hex[2 * i + 1]);
            if (high < 0 || low < 0) { fprintf(stderr, "vhci-controller: %s:%d: bad hex\n", path, number); exit(2); }
            a.payload[i] = (uint8_t)(high << 4 | low);
        }
        a.payload_size = size / 2;
        a.rssi = (int8_t)rssi;
        a.next_ms = a.from_ms;
        advertisers[advertiser_count++] = a;
    }
    fclose(file);
}

static void set_scanning(int enable, int extended);

static void send_packet(const uint8_t *packet, int size) {
    /* /dev/vhci takes one whole packet per write; a short write would desynchronise the host.
     * ENXIO: the host has taken the adapter down (hciconfig down), which stops the scan without
     * telling the controller; a real controller's reports are dropped the same way. */
    ssize_t written = write(fd, packet, size);
    if (written < 0 && errno == ENXIO) { set_scanning(0, scanning_extended); return; }
    if (written != size) die("write /dev/vhci");
}

/* Return parameters after the status octet, sized as the Core spec defines them (the kernel
 * rejects a Command Complete shorter than the command's reply). Unlisted commands (Reset, Set
 * Event Mask, the scan commands...) return the status alone. */
static int reply(uint16_t opcode, uint8_t *parameters) {
    switch (opcode) {
    case 0x1001: /* Read Local Version Information: Bluetooth 5.2 (0x0b), manufacturer 0xffff */
        parameters[0] = 0x0b; parameters[3] = 0x0b; parameters[4] = 0xff; parameters[5] = 0xff;
        return 8;
    case 0x1002: /* Read Local Supported Commands */
        if (claims_extended) parameters[37] = 0x20 | 0x40;
        return 64;
    case 0x1003: /* Read Local Supported Features: byte 4 = LE supported, BR/EDR not supported */
        parameters[4] = 0x60;
        return 8;
    case 0x1009: /* Read BD_ADDR */
        memcpy(parameters, "\x01\x00\x00\xb0\x0c\xc0", 6);
        return 6;
    case 0x2002: /* LE Read Buffer Size: 251-octet ACL packets, 8 of them */
        parameters[0] = 251; parameters[2] = 8;
        return 3;
    case 0x2003: /* LE Read Local Supported Features */
    case 0x201c: /* LE Read Supported States */
        return 8;
    case 0x200f: /* LE Read Filter Accept List Size */
        parameters[0] = 8;
        return 1;
    case 0x2007: /* LE Read Advertising Physical Channel Tx Power: 0 dBm */
    case 0x2036: /* LE Set Extended Advertising Parameters: Selected_TX_Power 0 dBm */
        return 1;
    default:
        return 0;
    }
}

static void set_scanning(int enable, int extended) {
    if (enable == scanning && (!enable || extended == scanning_extended)) return;
    scanning = enable;
    scanning_extended = extended;
    if (enable && scan_started_ms < 0) scan_started_ms = now_ms();
    printf("vhci: scanning %s (%s)\n", enable ? "on" : "off", extended ? "extended" : "legacy");
    fflush(stdout);
}

static void print_hex(const uint8_t *bytes, int count) {
    for (int i = 0; i < count; i++) printf("%02x", bytes[i]);
}

/* The advertising commands, as the header describes; lengths are checked before any field is
 * read. */
static void log_advertising(uint16_t opcode, const uint8_t *p, int length) {
    if (opcode == 0x2006 && length >= 15)
        printf("vhci: advertising parameters interval %d %d type %d own %d channels %d\n",
               p[0] | p[1] << 8, p[2] | p[3] << 8, p[4], p[5], p[13]);
    if (opcode == 0x2008 && length >= 1 && p[0] <= 31 && length >= 1 + p[0]) {
        printf("vhci: advertising data %d ", p[0]);
        print_hex(p + 1, p[0]);
        printf("\n");
    }
    if (opcode == 0x200a && length >= 1) {
        advertising = p[0] == 1;
        printf("vhci: advertising %s\n", advertising ? "on" : "off");
    }
    if (opcode == 0x2036 && length >= 25)
        printf("vhci: extended advertising parameters handle %d properties 0x%04x interval %d %d channels %d own %d\n",
               p[0], p[1] | p[2] << 8, p[3] | p[4] << 8 | p[5] << 16, p[6] | p[7] << 8 | p[8] << 16, p[9], p[10]);
    if (opcode == 0x2037 && length >= 4 && length >= 4 + p[3]) {
        printf("vhci: advertising data %d ", p[3]);
        print_hex(p + 4, p[3]);
        printf(" (extended, handle %d)\n", p[0]);
    }
    if (opcode == 0x2039 && length >= 2) {
        advertising = p[0] == 1;
        if (p[1] >= 1 && length >= 2 + 4 * p[1]) printf("vhci: advertising %s (extended, handle %d)\n", advertising ? "on" : "off", p[2]);
        else printf("vhci: advertising %s (extended, all sets)\n", advertising ? "on" : "off");
    }
}

static void answer(const uint8_t *command, int size) {
    if (size < 4 || size < 4 + command[3]) return;
    uint16_t opcode = (uint16_t)(command[1] | command[2] << 8);
    const uint8_t *parameters = command + 4;
    if (fault == fault_mute) {
        printf("vhci: ignored 0x%04x\n", opcode);
        fflush(stdout);
        return;
    }
    if (opcode == 0x0c03 && fault == fault_deaf_until_reset) {
        fault = fault_none;
        printf("vhci: HCI Reset clears the fault\n");
    }
    if (opcode == 0x0c03) set_scanning(0, 0);                                    /* Reset */
    if (opcode == 0x0c03 && advertising) { advertising = 0; printf("vhci: advertising off (reset)\n"); }
    log_advertising(opcode, parameters, command[3]);
    if (opcode == 0x200c && command[3] >= 1) set_scanning(parameters[0] == 1, 0);  /* LE Set Scan Enable */
    if (opcode == 0x2042 && command[3] >= 1) set_scanning(parameters[0] == 1, 1);  /* LE Set Extended Scan Enable */
    /* The scan timing the host chose, in 0.625 ms units: LE Set Scan Parameters (type, interval,
     * window, ...) and LE Set Extended Scan Parameters (own address, policy, PHYs, then per PHY
     * type, interval, window). */
    if (opcode == 0x200b && command[3] >= 5)
        printf("vhci: scan parameters interval %d window %d\n", parameters[1] | parameters[2] << 8, parameters[3] | parameters[4] << 8);
    if (opcode == 0x2041 && command[3] >= 8)
        printf("vhci: scan parameters interval %d window %d\n", parameters[4] | parameters[5] << 8, parameters[6] | parameters[7] << 8);
    fflush(stdout);
    uint8_t event[packet_max] = {0x04, 0x0e, 0, 0x01, command[1], command[2], 0x00};
    int count = reply(opcode, event + 7);
    event[2] = (uint8_t)(4 + count);
    send_packet(event, 7 + count);
}

static void advertise(const struct advertiser *a) {
    uint8_t event[packet_max];
    int n = 0;
    event[n++] = 0x04;
    event[n++] = 0x3e;
    n++; /* parameter length, set below */
    if (scanning_extended) {
        event[n++] = 0x0d;                            /* LE Extended Advertising Report */
        event[n++] = 1;                               /* one report */
        event[n++] = 0x10; event[n++] = 0x00;         /* legacy ADV_NONCONN_IND, data complete */
        event[n++] = 0x01;                            /* random address */
        memcpy(event + n, a->address, 6); n += 6;
        event[n++] = 0x01;                            /* primary PHY LE 1M */
        event[n++] = 0x00;                            /* no secondary PHY */
        event[n++] = 0xff;                            /* no ADI */
        event[n++] = 0x7f;                            /* TX power not available */
        event[n++] = (uint8_t)a->rssi;
        event[n++] = 0; event[n++] = 0;               /* no periodic advertising */
        event[n++] = 0;                               /* direct address type, address: none */
        memset(event + n, 0, 6); n += 6;
        event[n++] = (uint8_t)a->payload_size;
        memcpy(event + n, a->payload, a->payload_size); n += a->payload_size;
    } else {
        event[n++] = 0x02;                            /* LE Advertising Report */
        event[n++] = 1;
        event[n++] = 0x03;                            /* ADV_NONCONN_IND */
        event[n++] = 0x01;
        memcpy(event + n, a->address, 6); n += 6;
        event[n++] = (uint8_t)a->payload_size;
        memcpy(event + n, a->payload, a->payload_size); n += a->payload_size;
        event[n++] = (uint8_t)a->rssi;
    }
    event[2] = (uint8_t)(n - 3);
    send_packet(event, n);
    printf("vhci: report %02X:%02X:%02X:%02X:%02X:%02X %d\n", a->address[5], a->address[4], a->address[3],
           a->address[2], a->address[1], a->address[0], a->rssi);
    fflush(stdout);
}

/* Milliseconds until the next report is due (-1: none), sending those already due. */
static int advertise_due(void) {
    if (scan_started_ms < 0) return -1;
    long elapsed = now_ms() - scan_started_ms;
    long wait = -1;
    for (int i = 0; i < advertiser_count; i++) {
        struct advertiser *a = &advertisers[i];
        while (a->next_ms < a->to_ms && a->next_ms <= elapsed) {
            if (scanning && fd >= 0 && fault == fault_none) advertise(a);
            a->next_ms += a->every_ms;
        }
        if (a->next_ms < a->to_ms && (wait < 0 || a->next_ms - elapsed < wait)) wait = a->next_ms - elapsed;
    }
    return (int)wait;
}

/* The first word of a small file, or "" when it cannot be read. */
static void read_word(const char *path, char *word, size_t size) {
    word[0] = 0;
    FILE *file = fopen(path, "r");
    if (!file) return;
    if (fscanf(file, "%31s", word) != 1) word[0] = 0;
    fclose(file);
    (void)size;
}

static void power_on(void) {
    fd = open("/dev/vhci", O_RDWR);
    if (fd < 0) die("/dev/vhci");
    /* Vendor packet 0xff with opcode 0x00: create a primary controller; answered ff 00 index. */
    send_packet((const uint8_t *)"\xff\x00", 2);
}

/* The control file's fault and the power line's level, when they changed. */
static void read_faults(void) {
    char word[32];
    if (control_path) {
        read_word(control_path, word, sizeof word);
        if (strcmp(word, control_word) != 0) {
            strcpy(control_word, word);
            fault = strcmp(word, "mute") == 0 ? fault_mute : strcmp(word, "deaf") == 0 ? fault_deaf
                  : strcmp(word, "deaf-until-reset") == 0 ? fault_deaf_until_reset : fault_none;
            printf("vhci: fault %s\n", word[0] ? word : "ok");
        }
    }
    if (power_path) {
        read_word(power_path, word, sizeof word);
        int level = word[0] == '1';
        if (word[0] && level != powered) {
            powered = level;
            if (!level) {
                close(fd);
                fd = -1;
                scanning = 0;
                if (advertising) { advertising = 0; printf("vhci: advertising off (power off)\n"); }
                printf("vhci: power off\n");
            } else {
                fault = fault_none;
                power_on();
                printf("vhci: power on\n");
            }
        }
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    int first = 1;
    for (; first < argc - 1; first++) {
        if (strcmp(argv[first], "-x") == 0) claims_extended = 1;
        else if (strcmp(argv[first], "-c") == 0 && first + 2 < argc) control_path = argv[++first];
        else if (strcmp(argv[first], "-p") == 0 && first + 2 < argc) power_path = argv[++first];
        else break;
    }
    if (argc != first + 1) { fprintf(stderr, "usage: vhci-controller [-x] [-c CONTROL] [-p POWER] SCHEDULE\n"); return 2; }
    read_schedule(argv[first]);
    power_on();
    uint8_t packet[packet_max];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int wait = advertise_due();
        if (control_path || power_path) wait = wait < 0 || wait > 50 ? 50 : wait;
        int ready = poll(&p, fd >= 0 ? 1 : 0, wait);
        if (ready < 0 && errno != EINTR) die("poll");
        read_faults();
        if (ready <= 0 || fd < 0) continue;
        ssize_t size = read(fd, packet, sizeof packet);
        if (size < 0 && errno == EINTR) continue;
        if (size <= 0) die("read /dev/vhci");
        if (packet[0] == 0xff && size >= 4) {
            printf("vhci: hci%d\n", packet[2] | packet[3] << 8);
            fflush(stdout);
        } else if (packet[0] == 0x01) {
            answer(packet, (int)size);
        }
    }
}
