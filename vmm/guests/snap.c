/* snap: a guest to snapshot and restore. It fills 64 KiB with a pattern,
 * then ticks: each tick checks the pattern, writes "tick-N" to disk sector
 * N % 8 + 1 and reads the previous tick's sector back (the disk and its
 * queue must carry across a restore), polls its vsock event queue (a
 * restore's TRANSPORT_RESET lands there), and prints the tick. After
 * cubicle.ticks=N ticks it resets. A restored copy goes on from the tick
 * the snapshot caught, with nothing of its first ticks printed again.
 * With cubicle.spin it prints dots without end after "ready" instead: the
 * snapshot bench times a restore to the first byte the copy prints. */
#include "rt.h"

#define T_IN 0
#define T_OUT 1
/* Small: on PVM (this project's usual host) each page a guest touches
 * first costs milliseconds. */
#define PATTERN (64 << 10)

struct req_hdr { u32 type; u32 reserved; u64 sector; };
static struct vq blkq, rxq, txq, evq;
static struct req_hdr hdr;
static u8 data[512] __attribute__((aligned(512)));
static u8 status;
static u8 evbuf[8];
static u8 pattern[PATTERN];
static u64 vsock_base;

static u8 blk(u32 type, u64 sector) {
    hdr.type = type;
    hdr.reserved = 0;
    hdr.sector = sector;
    status = 0xff;
    u64 a[3] = {(u64)&hdr, (u64)data, (u64)&status};
    u32 l[3] = {sizeof hdr, sizeof data, 1};
    u16 f[3] = {0, type == T_IN ? VQ_F_WRITE : 0, VQ_F_WRITE};
    vq_add(&blkq, a, l, f, 3);
    vq_kick(&blkq);
    u32 id, len;
    vq_wait(&blkq, &id, &len);
    return status;
}

static u8 byte_at(u64 i) { return (u8)(i * 31 + (i >> 9)); }

static void label(u64 n) {
    memset(data, 0, sizeof data);
    memcpy(data, "tick-", 5);
    u64 d = 1, at = 5;
    while (d * 10 <= n) d *= 10;
    for (; d; d /= 10) data[at++] = '0' + (n / d) % 10;
}

static void post_event_buffer(void) {
    u64 a = (u64)evbuf; u32 l = sizeof evbuf; u16 f = VQ_F_WRITE;
    vq_add(&evq, &a, &l, &f, 1);
    vq_kick(&evq);
}

static void poll_events(void) {
    u32 id, len;
    while (vsock_base && vq_poll(&evq, &id, &len)) {
        u32 event = *(volatile u32 *)evbuf;
        puts("snap guest: vsock event="); putdec(event);
        puts(" len="); putdec(len);
        u64 cid = mmio_read32(vsock_base + VM_CONFIG);
        puts(" cid="); putdec(cid); putc('\n');
        post_event_buffer();
    }
}

static u64 ticks_wanted(const char *c) {
    const char *key = "cubicle.ticks=";
    for (; *c; c++) {
        int i = 0;
        while (key[i] && c[i] == key[i]) i++;
        if (key[i]) continue;
        u64 n = 0;
        for (c += i; *c >= '0' && *c <= '9'; c++) n = n * 10 + (*c - '0');
        return n;
    }
    return 20;
}

static void delay(void) {
    u32 lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    u64 until = ((u64)hi << 32 | lo) + 40000000UL;
    for (;;) {
        __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
        if (((u64)hi << 32 | lo) >= until) return;
        cpu_relax();
    }
}

void guest_main(const void *boot_params) {
    const char *cmdline = boot_cmdline(boot_params);
    struct virtio_slot s[MAX_VIRTIO];
    int n = virtio_mmio_find(cmdline, s, MAX_VIRTIO);
    u64 blk_base = 0;
    for (int i = 0; i < n; i++) {
        u32 type = mmio_read32(s[i].base + VM_DEVICE_ID);
        if (type == 2 && !blk_base) blk_base = s[i].base;
        if (type == 19) vsock_base = s[i].base;
    }
    if (!blk_base) fail("no virtio-blk device");
    virtio_init(blk_base, 0);
    vq_setup(&blkq, blk_base, 0);
    virtio_driver_ok(blk_base);
    if (vsock_base) {
        virtio_init(vsock_base, 0);
        vq_setup(&rxq, vsock_base, 0);
        vq_setup(&txq, vsock_base, 1);
        vq_setup(&evq, vsock_base, 2);
        virtio_driver_ok(vsock_base);
        post_event_buffer();
    }
    for (u64 i = 0; i < PATTERN; i++) pattern[i] = byte_at(i);
    u64 ticks = ticks_wanted(cmdline);
    puts("snap guest: ready\n");
    if (cmdline_has(cmdline, "cubicle.spin"))
        for (;;) {
            putc('.');
            for (int i = 0; i < 1000; i++) cpu_relax();
        }
    for (u64 t = 1; t <= ticks; t++) {
        for (u64 i = 0; i < PATTERN; i++)
            if (pattern[i] != byte_at(i)) fail("the memory pattern changed");
        label(t);
        if (blk(T_OUT, t % 8 + 1) != 0) fail("disk write");
        if (t > 1) {
            memset(data, 0, sizeof data);
            if (blk(T_IN, (t - 1) % 8 + 1) != 0) fail("disk read");
            u8 want[512];
            memcpy(want, data, sizeof want);
            label(t - 1);
            if (memcmp(want, data, 16)) fail("the previous tick's sector differs");
        }
        poll_events();
        puts("snap guest: tick "); putdec(t); putc('\n');
        delay();
    }
    puts("snap guest: done\n");
    reset();
}
