/* hello: serial output and an i8042 reset. With "cubicle.idle" on the command
 * line it stays halted instead (for memory measurements). */
#include "rt.h"

static void cpuid(u32 leaf, u32 r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(0));
}

/* What the VMM put in CPUID: the hypervisor bit and KVM's signature leaf. */
static void print_cpuid(void) {
    u32 r[4], sig[4] = {0};
    cpuid(1, r);
    puts("hello guest: cpuid hypervisor-bit=");
    putc(r[2] >> 31 ? '1' : '0');
    cpuid(0x40000000, r);
    sig[0] = r[1];
    sig[1] = r[2];
    sig[2] = r[3];
    puts(" signature=");
    putn((const char *)sig, 12);
    putc('\n');
}

void guest_main(const void *boot_params) {
    const char *cmdline = boot_cmdline(boot_params);
    puts("hello guest: ready\n");
    print_cpuid();
    puts("hello guest: cmdline=");
    puts(cmdline);
    putc('\n');
    if (cmdline_has(cmdline, "cubicle.idle")) {
        for (;;) __asm__ volatile("hlt");
    }
    puts("hello guest: resetting\n");
    reset();
}
