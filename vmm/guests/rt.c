#include "rt.h"

void *memset(void *d, int c, size_t n) { u8 *p = d; while (n--) *p++ = (u8)c; return d; }
void *memcpy(void *d, const void *s, size_t n) { u8 *p = d; const u8 *q = s; while (n--) *p++ = *q++; return d; }
int memcmp(const void *a, const void *b, size_t n) {
    const u8 *p = a, *q = b;
    for (; n; n--, p++, q++) if (*p != *q) return *p - *q;
    return 0;
}
size_t strlen(const char *s) { size_t n = 0; while (s[n]) n++; return n; }

void putc(char c) {
    while (!(inb(0x3fd) & 0x20)) cpu_relax();
    outb(0x3f8, (u8)c);
}
void puts(const char *s) { while (*s) putc(*s++); }
void putn(const char *s, size_t n) { while (n--) putc(*s++); }
void puthex(u64 v) {
    puts("0x");
    for (int i = 60; i >= 0; i -= 4) {
        u8 d = (v >> i) & 0xf;
        if (v >> i || i == 0) putc(d < 10 ? '0' + d : 'a' + d - 10);
    }
}
void putdec(u64 v) {
    char buf[24]; int i = 0;
    do { buf[i++] = '0' + v % 10; v /= 10; } while (v);
    while (i) putc(buf[--i]);
}
void reset(void) {
    outb(0x64, 0xfe);
    for (;;) __asm__ volatile("hlt");
}
void fail(const char *why) { puts("FAIL: "); puts(why); putc('\n'); reset(); }

const char *boot_cmdline(const void *bp) {
    u32 lo = *(const u32 *)((const u8 *)bp + 0x228);
    u32 hi = *(const u32 *)((const u8 *)bp + 0x0c8);
    return (const char *)(((u64)hi << 32) | lo);
}

int cmdline_has(const char *c, const char *w) {
    size_t n = strlen(w);
    for (; *c; c++) if (!memcmp(c, w, n)) return 1;
    return 0;
}

static u64 parse_num(const char **s, int base) {
    u64 v = 0;
    for (;; (*s)++) {
        char ch = **s; int d;
        if (ch >= '0' && ch <= '9') d = ch - '0';
        else if (base == 16 && ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
        else break;
        v = v * base + d;
    }
    return v;
}

static u64 parse_size(const char **s) {
    u64 v = parse_num(s, 10);
    if (**s == 'K') { v <<= 10; (*s)++; }
    else if (**s == 'M') { v <<= 20; (*s)++; }
    else if (**s == 'G') { v <<= 30; (*s)++; }
    return v;
}

int virtio_mmio_find(const char *c, struct virtio_slot *out, int max) {
    static const char key[] = "virtio_mmio.device=";
    int n = 0;
    for (; *c && n < max; c++) {
        if (memcmp(c, key, sizeof key - 1)) continue;
        const char *p = c + sizeof key - 1;
        out[n].size = parse_size(&p);
        if (*p++ != '@' || *p++ != '0' || *p++ != 'x') continue;
        out[n].base = parse_num(&p, 16);
        if (*p++ != ':') continue;
        out[n].irq = (u32)parse_num(&p, 10);
        n++;
    }
    return n;
}

u64 virtio_init(u64 b, u64 want) {
    if (mmio_read32(b + VM_MAGIC) != 0x74726976) fail("virtio magic");
    if (mmio_read32(b + VM_VERSION) != 2) fail("virtio version");
    mmio_write32(b + VM_STATUS, 0);
    mmio_write32(b + VM_STATUS, 1);     /* ACKNOWLEDGE */
    mmio_write32(b + VM_STATUS, 1 | 2); /* DRIVER */
    mmio_write32(b + VM_DEV_FEATURES_SEL, 0);
    u64 offered = mmio_read32(b + VM_DEV_FEATURES);
    mmio_write32(b + VM_DEV_FEATURES_SEL, 1);
    offered |= (u64)mmio_read32(b + VM_DEV_FEATURES) << 32;
    if (!(offered & (1UL << 32))) fail("device lacks VIRTIO_F_VERSION_1");
    u64 take = (want & offered) | (1UL << 32);
    mmio_write32(b + VM_DRV_FEATURES_SEL, 0);
    mmio_write32(b + VM_DRV_FEATURES, (u32)take);
    mmio_write32(b + VM_DRV_FEATURES_SEL, 1);
    mmio_write32(b + VM_DRV_FEATURES, (u32)(take >> 32));
    mmio_write32(b + VM_STATUS, 1 | 2 | 8); /* FEATURES_OK */
    if (!(mmio_read32(b + VM_STATUS) & 8)) fail("FEATURES_OK not accepted");
    return offered;
}

void virtio_driver_ok(u64 b) { mmio_write32(b + VM_STATUS, 1 | 2 | 8 | 4); }

void vq_setup(struct vq *q, u64 b, u32 index) {
    memset(q, 0, sizeof *q);
    q->base = b;
    q->index = index;
    mmio_write32(b + VM_QUEUE_SEL, index);
    if (mmio_read32(b + VM_QUEUE_NUM_MAX) < QSZ) fail("queue too small");
    mmio_write32(b + VM_QUEUE_NUM, QSZ);
    mmio_write32(b + VM_QUEUE_DESC_LO, (u32)(u64)q->desc);
    mmio_write32(b + VM_QUEUE_DESC_HI, (u32)((u64)q->desc >> 32));
    mmio_write32(b + VM_QUEUE_AVAIL_LO, (u32)(u64)&q->avail);
    mmio_write32(b + VM_QUEUE_AVAIL_HI, (u32)((u64)&q->avail >> 32));
    mmio_write32(b + VM_QUEUE_USED_LO, (u32)(u64)&q->used);
    mmio_write32(b + VM_QUEUE_USED_HI, (u32)((u64)&q->used >> 32));
    mmio_write32(b + VM_QUEUE_READY, 1);
}

u16 vq_add(struct vq *q, const u64 *addrs, const u32 *lens, const u16 *flags, int n) {
    u16 head = q->free_head;
    for (int i = 0; i < n; i++) {
        u16 d = (q->free_head + i) % QSZ;
        q->desc[d].addr = addrs[i];
        q->desc[d].len = lens[i];
        q->desc[d].flags = flags[i] | (i + 1 < n ? VQ_F_NEXT : 0);
        q->desc[d].next = (d + 1) % QSZ;
    }
    q->free_head = (q->free_head + n) % QSZ;
    q->avail.ring[q->avail.idx % QSZ] = head;
    barrier();
    q->avail.idx++;
    barrier();
    return head;
}

void vq_kick(struct vq *q) { barrier(); mmio_write32(q->base + VM_QUEUE_NOTIFY, q->index); }

int vq_poll(struct vq *q, u32 *id, u32 *len) {
    barrier();
    if (*(volatile u16 *)&q->used.idx == q->last_used) return 0;
    *id = q->used.ring[q->last_used % QSZ].id;
    *len = q->used.ring[q->last_used % QSZ].len;
    q->last_used++;
    return 1;
}

void vq_wait(struct vq *q, u32 *id, u32 *len) {
    for (unsigned long spins = 0; !vq_poll(q, id, len); spins++) {
        if (spins > 4000000000UL) fail("timed out waiting for the device");
        cpu_relax();
    }
}
