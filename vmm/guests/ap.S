/* Real-mode trampoline for application processors. The smp guest copies it
 * to 0x3000 and sends INIT + SIPI (vector 3): each AP starts here with
 * CS=0x300, IP=0, says 'A' on COM1, counts itself in at 0x3ff0, and halts.
 * The 'A' comes first: once the BSP has counted every AP in, no AP still
 * has a byte to write into the BSP's report (an 'A' landed inside
 * "aps up=" once, in the nested host). */
    .section .rodata
    .code16
    .globl ap_start, ap_end
ap_start:
    cli
    xor %ax, %ax
    mov %ax, %ds
    mov $0x3f8, %dx
    mov $'A', %al
    outb %al, %dx
    lock incw 0x3ff0
1:  hlt
    jmp 1b
ap_end:
    .code64

    .section .note.GNU-stack, "", @progbits
