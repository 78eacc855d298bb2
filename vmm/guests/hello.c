/* hello: serial output and an i8042 reset. With "cubicle.idle" on the command
 * line it stays halted instead (for memory measurements). */
#include "rt.h"

void guest_main(const void *boot_params) {
    const char *cmdline = boot_cmdline(boot_params);
    puts("hello guest: ready\n");
    puts("hello guest: cmdline=");
    puts(cmdline);
    putc('\n');
    if (cmdline_has(cmdline, "cubicle.idle")) {
        for (;;) __asm__ volatile("hlt");
    }
    puts("hello guest: resetting\n");
    reset();
}
