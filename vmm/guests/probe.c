/* probe: finds the virtio-mmio devices the VMM declared on the command line
 * and prints what each one says it is. */
#include "rt.h"

void guest_main(const void *boot_params) {
    struct virtio_slot slots[MAX_VIRTIO];
    int n = virtio_mmio_find(boot_cmdline(boot_params), slots, MAX_VIRTIO);
    puts("probe guest: devices=");
    putdec(n);
    putc('\n');
    for (int i = 0; i < n; i++) {
        u64 b = slots[i].base;
        puts("virtio-mmio ");
        puthex(b);
        puts(" irq=");
        putdec(slots[i].irq);
        puts(mmio_read32(b + VM_MAGIC) == 0x74726976 ? " magic=ok" : " magic=BAD");
        puts(" version=");
        putdec(mmio_read32(b + VM_VERSION));
        puts(" device=");
        putdec(mmio_read32(b + VM_DEVICE_ID));
        puts(" vendor=");
        puthex(mmio_read32(b + VM_VENDOR));
        putc('\n');
    }
    puts("probe guest: done\n");
    reset();
}
