/* Freestanding runtime for Cubicle's VMM test guests: port and MMIO access,
 * COM1 output, the boot command line, virtio-mmio discovery and a tiny split
 * virtqueue driver. Guests poll (interrupts stay off) and run identity-mapped,
 * so a pointer is a guest-physical address. */
#ifndef CUBICLE_GUEST_RT_H
#define CUBICLE_GUEST_RT_H

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long u64;
typedef unsigned long size_t;

static inline void outb(u16 port, u8 v) { __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port)); }
static inline u8 inb(u16 port) { u8 v; __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port)); return v; }
static inline u32 mmio_read32(u64 a) { return *(volatile u32 *)a; }
static inline void mmio_write32(u64 a, u32 v) { *(volatile u32 *)a = v; }
static inline u8 mmio_read8(u64 a) { return *(volatile u8 *)a; }
static inline void barrier(void) { __asm__ volatile("mfence" ::: "memory"); }
static inline void cpu_relax(void) { __asm__ volatile("pause" ::: "memory"); }

void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);

void putc(char c);
void puts(const char *s);
void putn(const char *s, size_t n);
void puthex(u64 v);
void putdec(u64 v);
/* Asks the i8042 for a CPU reset: the VMM exits cleanly. Never returns. */
void reset(void) __attribute__((noreturn));
/* Prints "FAIL: <why>" and resets. */
void fail(const char *why) __attribute__((noreturn));

/* The kernel command line from the Linux boot_params (zero page). */
const char *boot_cmdline(const void *boot_params);
int cmdline_has(const char *cmdline, const char *word);

#define MAX_VIRTIO 8
struct virtio_slot { u64 base; u64 size; u32 irq; };
/* Parses every virtio_mmio.device=<size>@<addr>:<irq> on the command line. */
int virtio_mmio_find(const char *cmdline, struct virtio_slot *out, int max);

/* virtio-mmio register offsets (virtio 1.2, 4.2.2). */
enum {
    VM_MAGIC = 0x00, VM_VERSION = 0x04, VM_DEVICE_ID = 0x08, VM_VENDOR = 0x0c,
    VM_DEV_FEATURES = 0x10, VM_DEV_FEATURES_SEL = 0x14,
    VM_DRV_FEATURES = 0x20, VM_DRV_FEATURES_SEL = 0x24,
    VM_QUEUE_SEL = 0x30, VM_QUEUE_NUM_MAX = 0x34, VM_QUEUE_NUM = 0x38,
    VM_QUEUE_READY = 0x44, VM_QUEUE_NOTIFY = 0x50,
    VM_INT_STATUS = 0x60, VM_INT_ACK = 0x64, VM_STATUS = 0x70,
    VM_QUEUE_DESC_LO = 0x80, VM_QUEUE_DESC_HI = 0x84,
    VM_QUEUE_AVAIL_LO = 0x90, VM_QUEUE_AVAIL_HI = 0x94,
    VM_QUEUE_USED_LO = 0xa0, VM_QUEUE_USED_HI = 0xa4,
    VM_CONFIG = 0x100,
};

#define QSZ 16
struct vq_desc { u64 addr; u32 len; u16 flags; u16 next; };
#define VQ_F_NEXT 1
#define VQ_F_WRITE 2
struct vq {
    struct vq_desc desc[QSZ] __attribute__((aligned(16)));
    struct { u16 flags; u16 idx; u16 ring[QSZ]; u16 used_event; } avail __attribute__((aligned(2)));
    struct { u16 flags; u16 idx; struct { u32 id; u32 len; } ring[QSZ]; u16 avail_event; } used __attribute__((aligned(4)));
    u64 base;      /* the device's MMIO base */
    u32 index;     /* queue index */
    u16 free_head; /* next free descriptor slot (descriptors are used round-robin) */
    u16 last_used;
};

/* Resets the device, negotiates VERSION_1 (plus `want` & offered), sets
 * FEATURES_OK. Returns the offered device features. */
u64 virtio_init(u64 base, u64 want);
void virtio_driver_ok(u64 base);
void vq_setup(struct vq *q, u64 base, u32 index);
/* Adds a chain of n buffers; returns the head descriptor index. */
u16 vq_add(struct vq *q, const u64 *addrs, const u32 *lens, const u16 *flags, int n);
void vq_kick(struct vq *q);
/* Returns 1 and fills id/len when the device has used a chain. */
int vq_poll(struct vq *q, u32 *id, u32 *len);
/* Waits for the next used chain (spins). */
void vq_wait(struct vq *q, u32 *id, u32 *len);

#endif
