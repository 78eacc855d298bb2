/* blkfill: writes the first virtio-blk device from sector 0 on, 64 KiB at a
 * time, until the device answers VIRTIO_BLK_S_IOERR or the disk ends; then
 * shows that the device still serves (a read and a flush) and idles, so a
 * test can look at the running VMM. With a copy-on-write overlay on a
 * size-capped filesystem, the error comes when that filesystem is full. */
#include "rt.h"

#define T_IN 0
#define T_OUT 1
#define T_FLUSH 4
#define F_FLUSH (1UL << 9)
#define CHUNK (64 * 1024)

struct req_hdr { u32 type; u32 reserved; u64 sector; };
static struct vq q;
static struct req_hdr hdr;
static u8 data[CHUNK] __attribute__((aligned(4096)));
static u8 status;

static u8 request(u32 type, u64 sector, u32 len) {
    hdr.type = type;
    hdr.reserved = 0;
    hdr.sector = sector;
    status = 0xff;
    u64 a[3] = {(u64)&hdr, (u64)data, (u64)&status};
    u32 l[3] = {sizeof hdr, len, 1};
    u16 f[3] = {0, type == T_IN ? VQ_F_WRITE : 0, VQ_F_WRITE};
    int n = 3;
    if (!len) { a[1] = a[2]; l[1] = l[2]; f[1] = f[2]; n = 2; }
    vq_add(&q, a, l, f, n);
    vq_kick(&q);
    u32 id, used;
    vq_wait(&q, &id, &used);
    return status;
}

static void fill(u64 b) {
    u64 feats = virtio_init(b, F_FLUSH);
    vq_setup(&q, b, 0);
    virtio_driver_ok(b);
    u64 cap = mmio_read32(b + VM_CONFIG) | (u64)mmio_read32(b + VM_CONFIG + 4) << 32;
    puts("blkfill: capacity="); putdec(cap); putc('\n');
    for (u64 i = 0; i < CHUNK; i++) data[i] = (u8)(i * 7 + 1);
    u64 sector = 0, step = CHUNK / 512;
    u8 st = 0;
    while (sector + step <= cap && (st = request(T_OUT, sector, CHUNK)) == 0) sector += step;
    if (st == 1) { puts("blkfill: ioerr at sector "); putdec(sector); putc('\n'); }
    else if (st == 0) { puts("blkfill: disk end at sector "); putdec(sector); putc('\n'); }
    else { puts("blkfill: status "); putdec(st); putc('\n'); }
    if (request(T_IN, 0, 512) != 0) fail("read after the fill");
    if (data[0] != 1 || data[1] != 8) fail("sector 0 does not hold what was written");
    if ((feats & F_FLUSH) && request(T_FLUSH, 0, 0) != 0) fail("flush after the fill");
    puts("blkfill: still serving\n");
}

void guest_main(const void *boot_params) {
    struct virtio_slot s[MAX_VIRTIO];
    int n = virtio_mmio_find(boot_cmdline(boot_params), s, MAX_VIRTIO);
    for (int i = 0; i < n; i++)
        if (mmio_read32(s[i].base + VM_DEVICE_ID) == 2) {
            fill(s[i].base);
            puts("blkfill: idle\n");
            for (;;) __asm__ volatile("hlt");
        }
    fail("no virtio-blk device");
}
