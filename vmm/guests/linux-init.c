/* The smallest Linux init: a static userspace program that says it ran
 * and restarts the machine (with `reboot=k`, through the i8042, which ends
 * the VM cleanly). The Linux boot tests put it in an initramfs as /init,
 * beside a /dev/console node, so it has the console as fds 0-2. Raw
 * system calls: no C library.
 *
 * With `cubicle_ticks=N` on the kernel command line (the kernel hands it
 * to init in its environment) it first ticks N times, a quarter second
 * apart by the kernel's timers, printing each tick: the snapshot tests
 * catch it mid-way and check that a restored copy goes on ticking, which
 * needs the restored LAPIC timer, kvmclock and interrupt controllers. */

#define SYS_write 1
#define SYS_nanosleep 35
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

static void say(const char *s)
{
	long n = 0;
	while (s[n])
		n++;
	syscall3(SYS_write, 1, (long)s, n);
}

static void say_number(long v)
{
	char buf[24];
	int i = sizeof buf;
	buf[--i] = 0;
	do {
		buf[--i] = '0' + v % 10;
		v /= 10;
	} while (v);
	say(buf + i);
}

static long ticks_wanted(char **envp)
{
	static const char key[] = "cubicle_ticks=";
	for (; *envp; envp++) {
		int i = 0;
		while (key[i] && (*envp)[i] == key[i])
			i++;
		if (key[i])
			continue;
		long n = 0;
		for (const char *c = *envp + i; *c >= '0' && *c <= '9'; c++)
			n = n * 10 + (*c - '0');
		return n;
	}
	return 0;
}

/* The kernel starts init with its stack holding argc, argv, then envp. */
__asm__(".global _start\n"
	"_start:\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call start\n");

void start(long *stack)
{
	char **envp = (char **)(stack + 1 + stack[0] + 1);
	say("cubicle-init: reached init\n");
	long ticks = ticks_wanted(envp);
	for (long t = 1; t <= ticks; t++) {
		long quarter[2] = {0, 250000000L};
		syscall3(SYS_nanosleep, (long)quarter, 0, 0);
		say("cubicle-init: tick ");
		say_number(t);
		say("\n");
	}
	if (ticks)
		say("cubicle-init: ticked\n");
	syscall3(SYS_sync, 0, 0, 0);
	syscall3(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_RESTART);
	for (;;)
		;
}
