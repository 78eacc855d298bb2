/* blk: drives every virtio-blk device through a split virtqueue: reads the
 * capacity, reads sector 0, writes sector 1 and reads it back, flushes.
 * A read-only device must refuse the write with VIRTIO_BLK_S_IOERR. */
#include "rt.h"

#define T_IN 0
#define T_OUT 1
#define T_FLUSH 4
#define F_RO (1UL << 5)
#define F_FLUSH (1UL << 9)

struct req_hdr { u32 type; u32 reserved; u64 sector; };
static struct vq q;
static struct req_hdr hdr;
static u8 data[512] __attribute__((aligned(512)));
static u8 status;

static u8 request(u32 type, u64 sector, int with_data) {
    hdr.type = type;
    hdr.reserved = 0;
    hdr.sector = sector;
    status = 0xff;
    u64 a[3] = {(u64)&hdr, (u64)data, (u64)&status};
    u32 l[3] = {sizeof hdr, sizeof data, 1};
    u16 f[3] = {0, type == T_IN ? VQ_F_WRITE : 0, VQ_F_WRITE};
    if (!with_data) { a[1] = a[2]; l[1] = l[2]; f[1] = f[2]; }
    vq_add(&q, a, l, f, with_data ? 3 : 2);
    vq_kick(&q);
    u32 id, len;
    vq_wait(&q, &id, &len);
    return status;
}

static void test_disk(int n, u64 b) {
    u64 feats = virtio_init(b, F_FLUSH);
    vq_setup(&q, b, 0);
    virtio_driver_ok(b);
    u64 cap = mmio_read32(b + VM_CONFIG) | (u64)mmio_read32(b + VM_CONFIG + 4) << 32;
    puts("blk"); putdec(n); puts(": capacity="); putdec(cap);
    puts(feats & F_RO ? " ro\n" : " rw\n");
    if (request(T_IN, 0, 1) != 0) fail("read of sector 0");
    puts("blk"); putdec(n); puts(": sector0="); putn((const char *)data, 16); putc('\n');
    memset(data, 0, sizeof data);
    memcpy(data, "written-by-guest", 16);
    u8 st = request(T_OUT, 1, 1);
    if (feats & F_RO) {
        if (st != 1) fail("read-only disk accepted a write");
        puts("blk"); putdec(n); puts(": write rejected (read-only)\n");
        return;
    }
    if (st != 0) fail("write of sector 1");
    memset(data, 0, sizeof data);
    if (request(T_IN, 1, 1) != 0) fail("read back of sector 1");
    if (memcmp(data, "written-by-guest", 16)) fail("read back differs");
    if ((feats & F_FLUSH) && request(T_FLUSH, 0, 0) != 0) fail("flush");
    puts("blk"); putdec(n); puts(": write+readback ok\n");
}

void guest_main(const void *boot_params) {
    struct virtio_slot s[MAX_VIRTIO];
    int n = virtio_mmio_find(boot_cmdline(boot_params), s, MAX_VIRTIO), disks = 0;
    for (int i = 0; i < n; i++)
        if (mmio_read32(s[i].base + VM_DEVICE_ID) == 2) test_disk(disks++, s[i].base);
    if (!disks) fail("no virtio-blk device");
    puts("blk guest: done\n");
    reset();
}
