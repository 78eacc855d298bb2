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
 * needs the restored LAPIC timer, kvmclock and interrupt controllers.
 *
 * For the snapshot bench: `cubicle_dirty=M` first writes M MiB of fresh
 * memory (so a snapshot has that much more to save), and `cubicle_spin`
 * then prints dots without end (a restore is timed to the first byte). */

#define SYS_write 1
#define SYS_mmap 9
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

static long syscall6(long nr, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* The number after `key` in the environment, or -1. */
static long env_number(char **envp, const char *key)
{
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
	return -1;
}

static void dirty(long mib)
{
	long len = mib << 20;
	/* PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS */
	long at = syscall6(SYS_mmap, 0, len, 3, 0x22, -1, 0);
	if (at < 0 && at > -4096) {
		say("cubicle-init: cannot map memory to dirty\n");
		return;
	}
	for (long i = 0; i < len; i += 4096)
		((volatile char *)at)[i] = (char)(i >> 12 | 1);
	say("cubicle-init: dirtied ");
	say_number(mib);
	say(" MiB\n");
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
	long mib = env_number(envp, "cubicle_dirty=");
	if (mib > 0)
		dirty(mib);
	if (env_number(envp, "cubicle_spin=") >= 0)
		for (;;) {
			long millisecond[2] = {0, 1000000L};
			say(".");
			syscall3(SYS_nanosleep, (long)millisecond, 0, 0);
		}
	long ticks = env_number(envp, "cubicle_ticks=");
	for (long t = 1; t <= ticks; t++) {
		long quarter[2] = {0, 250000000L};
		syscall3(SYS_nanosleep, (long)quarter, 0, 0);
		say("cubicle-init: tick ");
		say_number(t);
		say("\n");
	}
	if (ticks > 0)
		say("cubicle-init: ticked\n");
	syscall3(SYS_sync, 0, 0, 0);
	syscall3(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_RESTART);
	for (;;)
		;
}
