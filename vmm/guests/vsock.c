/* vsock: a virtio-vsock driver that (1) opens a stream to host port 5000,
 * sends a greeting and prints what the host echoes back, and (2) listens on
 * port 1234 and echoes every byte the host sends until the host shuts the
 * stream down. It posts RX buffers in both layouts Linux guests use (header
 * and data in one descriptor, or in two) and sends in both layouts too. */
#include "rt.h"

struct hdr {
    u64 src_cid, dst_cid;
    u32 src_port, dst_port, len;
    u16 type, op;
    u32 flags, buf_alloc, fwd_cnt;
} __attribute__((packed));

enum { OP_REQUEST = 1, OP_RESPONSE, OP_RST, OP_SHUTDOWN, OP_RW, OP_CREDIT_UPDATE, OP_CREDIT_REQUEST };
#define HDR 44
#define BUF 1024
#define NRX 6
#define GUEST_PORT 1025
#define HOST_PORT 5000
#define LISTEN_PORT 1234

static struct vq rxq, txq, evq;
static u8 rxbuf[NRX][HDR + BUF];
static int head_buf[QSZ];
static u8 txbuf[HDR + BUF];
static u8 evbuf[8];
static u64 cid;
static u32 fwd_cnt[2];
static int g_done, h_done, h_peer_port;

static void post_rx(int i) {
    u64 a[2] = {(u64)rxbuf[i], (u64)rxbuf[i] + HDR};
    u32 l[2] = {HDR, BUF};
    u16 f[2] = {VQ_F_WRITE, VQ_F_WRITE};
    u16 head;
    if (i % 2) {
        l[0] = HDR + BUF;
        head = vq_add(&rxq, a, l, f, 1);
    } else {
        head = vq_add(&rxq, a, l, f, 2);
    }
    head_buf[head] = i;
}

static void send(u16 op, u32 src, u32 dst, u32 flags, const void *data, u32 len, int one_desc) {
    struct hdr h = {cid, 2, src, dst, len, 1, op, flags, 65536, fwd_cnt[src == LISTEN_PORT]};
    memcpy(txbuf, &h, HDR);
    memcpy(txbuf + HDR, data, len);
    u64 a[2] = {(u64)txbuf, (u64)txbuf + HDR};
    u32 l[2] = {HDR, len};
    u16 f[2] = {0, 0};
    if (one_desc || !len) l[0] = HDR + len;
    vq_add(&txq, a, l, f, (one_desc || !len) ? 1 : 2);
    vq_kick(&txq);
    u32 id, n;
    vq_wait(&txq, &id, &n);
}

static void on_guest_conn(const struct hdr *h, const u8 *data) {
    if (h->op == OP_RESPONSE) {
        send(OP_RW, GUEST_PORT, HOST_PORT, 0, "hello from guest", 16, 0);
    } else if (h->op == OP_RW) {
        fwd_cnt[0] += h->len;
        puts("vsock guest-initiated echo: ");
        putn((const char *)data, h->len);
        putc('\n');
        send(OP_SHUTDOWN, GUEST_PORT, HOST_PORT, 3, 0, 0, 1);
        g_done = 1;
    } else if (h->op == OP_RST) {
        if (!g_done) fail("host refused the guest-initiated stream");
    }
}

static void on_listen_conn(const struct hdr *h, const u8 *data) {
    if (h->op == OP_REQUEST) {
        h_peer_port = h->src_port;
        send(OP_RESPONSE, LISTEN_PORT, h->src_port, 0, 0, 0, 1);
        puts("vsock guest: accepted host stream\n");
    } else if (h->op == OP_RW) {
        fwd_cnt[1] += h->len;
        if (h->len <= 64) {
            puts("vsock host stream: ");
            putn((const char *)data, h->len);
            putc('\n');
        }
        send(OP_RW, LISTEN_PORT, h_peer_port, 0, data, h->len, 1);
    } else if (h->op == OP_SHUTDOWN || h->op == OP_RST) {
        if (h->op == OP_SHUTDOWN) send(OP_RST, LISTEN_PORT, h_peer_port, 0, 0, 0, 1);
        puts("vsock guest: host stream closed\n");
        h_done = 1;
    }
}

static void on_packet(const struct hdr *h, const u8 *data) {
    if (h->dst_cid != cid) fail("packet for another CID");
    if (h->op == OP_CREDIT_REQUEST) {
        send(OP_CREDIT_UPDATE, h->dst_port, h->src_port, 0, 0, 0, 1);
    } else if (h->dst_port == GUEST_PORT) {
        on_guest_conn(h, data);
    } else if (h->dst_port == LISTEN_PORT) {
        on_listen_conn(h, data);
    } else if (h->op == OP_REQUEST) {
        send(OP_RST, h->dst_port, h->src_port, 0, 0, 0, 1);
    }
}

void guest_main(const void *boot_params) {
    struct virtio_slot s[MAX_VIRTIO];
    int n = virtio_mmio_find(boot_cmdline(boot_params), s, MAX_VIRTIO);
    u64 b = 0;
    for (int i = 0; i < n; i++)
        if (mmio_read32(s[i].base + VM_DEVICE_ID) == 19) b = s[i].base;
    if (!b) fail("no virtio-vsock device");
    virtio_init(b, 0);
    vq_setup(&rxq, b, 0);
    vq_setup(&txq, b, 1);
    vq_setup(&evq, b, 2);
    virtio_driver_ok(b);
    cid = mmio_read32(b + VM_CONFIG) | (u64)mmio_read32(b + VM_CONFIG + 4) << 32;
    puts("vsock guest: cid="); putdec(cid); putc('\n');
    u64 ea = (u64)evbuf; u32 el = sizeof evbuf; u16 ef = VQ_F_WRITE;
    vq_add(&evq, &ea, &el, &ef, 1);
    for (int i = 0; i < NRX; i++) post_rx(i);
    vq_kick(&rxq);
    vq_kick(&evq);
    send(OP_REQUEST, GUEST_PORT, HOST_PORT, 0, 0, 0, 1);
    while (!(g_done && h_done)) {
        u32 id, len;
        vq_wait(&rxq, &id, &len);
        if (id >= QSZ) fail("bad used id");
        int i = head_buf[id];
        const struct hdr *h = (const struct hdr *)rxbuf[i];
        if (len < HDR || h->len > BUF || len != HDR + h->len) fail("bad rx length");
        on_packet(h, rxbuf[i] + HDR);
        post_rx(i);
        vq_kick(&rxq);
    }
    puts("vsock guest: done\n");
    reset();
}
