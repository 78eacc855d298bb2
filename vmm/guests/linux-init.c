/* The smallest Linux init: a static userspace program that says it ran
 * and restarts the machine (with `reboot=k`, through the i8042, which ends
 * the VM cleanly). The Linux boot tests put it in an initramfs as /init,
 * beside a /dev/console node, so it has the console as fds 0-2. Raw
 * system calls: no C library. */

#define SYS_write 1
#define SYS_sync 162
#define SYS_reboot 169
#define LINUX_REBOOT_MAGIC1 0xfee1deadL
#define LINUX_REBOOT_MAGIC2 672274793L
#define LINUX_REBOOT_CMD_RESTART 0x01234567L

static long syscall3(long nr, long a, long b, long c)
{
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

void _start(void)
{
	static const char said[] = "cubicle-init: reached init\n";
	syscall3(SYS_write, 1, (long)said, sizeof said - 1);
	syscall3(SYS_sync, 0, 0, 0);
	syscall3(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_RESTART);
	for (;;)
		;
}
