/* 64-bit entry for C test guests, Linux 64-bit boot protocol: the VMM enters
 * in long mode with an identity map of low memory and %rsi = boot_params. */
    .section .text.entry, "ax"
    .code64
    .globl _start
_start:
    cli
    lea stack_top(%rip), %rsp
    mov %rsi, %rdi
    call guest_main
1:  hlt
    jmp 1b

    .section .bss
    .balign 16
stack:
    .skip 16384
stack_top:

    .section .note.GNU-stack, "", @progbits
