/* PVH test guest (32-bit protected mode entry, paging off, %ebx = start_info).
 * Prints to COM1, checks the start_info magic, then asks the i8042 for a reset.
 * If nothing resets it (a VMM without an i8042, such as QEMU microvm), it
 * writes to QEMU's isa-debug-exit port, and failing that triple-faults. */
    .section .text.entry, "ax"
    .code32
    .globl _start
_start:
    cli
    mov $stack_top, %esp       /* PVH provides no stack */
    mov $msg_hello, %esi
    call puts
    cmpl $0x336ec578, (%ebx)
    jne 1f
    mov $msg_ok, %esi
    call puts
1:  mov $0xfe, %al
    outb %al, $0x64
    /* Not reset: try QEMU's isa-debug-exit (the benchmark adds it at 0xf4). */
    xor %al, %al
    outb %al, $0xf4
    lidt idt_null
    int3
2:  hlt
    jmp 2b

/* puts: write the NUL-terminated string at %esi to COM1. */
puts:
    lodsb
    test %al, %al
    jz 3f
    mov %al, %ah
    mov $0x3fd, %dx
4:  inb %dx, %al
    test $0x20, %al
    jz 4b
    mov $0x3f8, %dx
    mov %ah, %al
    outb %al, %dx
    jmp puts
3:  ret

    .section .rodata
msg_hello: .asciz "pvh guest: hello\n"
msg_ok:    .asciz "pvh guest: start_info ok\n"
    .balign 8
idt_null:  .word 0
           .long 0

    .section .bss
    .balign 16
stack:     .skip 4096
stack_top:

/* XEN_ELFNOTE_PHYS32_ENTRY (18): the 32-bit PVH entry point. */
    .section .note.pvh, "a"
    .balign 4
    .long 4
    .long 4
    .long 18
    .asciz "Xen"
    .long _start

    .section .note.GNU-stack, "", @progbits
