/* smp: wakes the other vCPUs with INIT + SIPI through the local APIC (the
 * way Linux does from the MP table) and counts them in. The expected number
 * of application processors comes from "cubicle.aps=N" on the command line. */
#include "rt.h"

#define LAPIC 0xfee00000UL
#define ICR_LO (LAPIC + 0x300)
#define TRAMPOLINE 0x3000UL
#define COUNTER ((volatile u16 *)0x3ff0)

extern const u8 ap_start[], ap_end[];

static void icr(u32 v) {
    mmio_write32(ICR_LO, v);
    for (int i = 0; i < 100000 && (mmio_read32(ICR_LO) & (1 << 12)); i++) cpu_relax();
}

static u64 expected_aps(const char *c) {
    static const char key[] = "cubicle.aps=";
    for (; *c; c++) {
        if (memcmp(c, key, sizeof key - 1)) continue;
        return c[sizeof key - 1] - '0';
    }
    return 0;
}

void guest_main(const void *boot_params) {
    u64 want = expected_aps(boot_cmdline(boot_params));
    memcpy((void *)TRAMPOLINE, ap_start, ap_end - ap_start);
    *COUNTER = 0;
    barrier();
    icr(0x000c4500);                      /* INIT, all excluding self */
    icr(0x000c4600 | (TRAMPOLINE >> 12)); /* SIPI, vector 3 */
    for (unsigned long spins = 0; *COUNTER < want && spins < 2000000000UL; spins++) cpu_relax();
    puts("\nsmp guest: aps up=");
    putdec(*COUNTER);
    putc('\n');
    reset();
}
