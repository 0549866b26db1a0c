//go:build amd64 && !purego

#include "textflag.h"

// HSUM reduces the 16 lanes of z into the low float of x with a fixed
// tree: (lo8+hi8) → (lo4+hi4) → (a0+a1)+(a2+a3).
#define HSUM(z, y, x) VEXTRACTF64X4 $1, z, Y14; VADDPS Y14, y, y; VEXTRACTF128 $1, y, X14; VADDPS X14, x, x; VHADDPS x, x, x; VHADDPS x, x, x

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv0() (eax, edx uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// func accum2x4(x0, x1, w unsafe.Pointer, K, k16 int, out *[8]float32)
// out[i*4+j] = 16-lane FMA accumulation over k < k16 of x_i · w_j (w_j =
// w + j*K floats), reduced by HSUM. Tails are the caller's.
TEXT ·accum2x4(SB), NOSPLIT, $0-48
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DI
	MOVQ w+16(FP), R8
	MOVQ K+24(FP), R9
	SHLQ $2, R9
	LEAQ (R8)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	LEAQ (R11)(R9*1), R12
	MOVQ k16+32(FP), CX
	SHLQ $2, CX
	MOVQ out+40(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ AX, AX
	CMPQ AX, CX
	JGE done2x4

loop2x4:
	VMOVUPS (R8)(AX*1), Z8
	VMOVUPS (R10)(AX*1), Z9
	VMOVUPS (R11)(AX*1), Z10
	VMOVUPS (R12)(AX*1), Z11
	VMOVUPS (SI)(AX*1), Z12
	VMOVUPS (DI)(AX*1), Z13
	VFMADD231PS Z8, Z12, Z0
	VFMADD231PS Z9, Z12, Z1
	VFMADD231PS Z10, Z12, Z2
	VFMADD231PS Z11, Z12, Z3
	VFMADD231PS Z8, Z13, Z4
	VFMADD231PS Z9, Z13, Z5
	VFMADD231PS Z10, Z13, Z6
	VFMADD231PS Z11, Z13, Z7
	ADDQ $64, AX
	CMPQ AX, CX
	JLT loop2x4

done2x4:
	HSUM(Z0, Y0, X0)
	HSUM(Z1, Y1, X1)
	HSUM(Z2, Y2, X2)
	HSUM(Z3, Y3, X3)
	HSUM(Z4, Y4, X4)
	HSUM(Z5, Y5, X5)
	HSUM(Z6, Y6, X6)
	HSUM(Z7, Y7, X7)
	MOVSS X0, 0(DX)
	MOVSS X1, 4(DX)
	MOVSS X2, 8(DX)
	MOVSS X3, 12(DX)
	MOVSS X4, 16(DX)
	MOVSS X5, 20(DX)
	MOVSS X6, 24(DX)
	MOVSS X7, 28(DX)
	VZEROUPPER
	RET

// func accum1x4(x0, w unsafe.Pointer, K, k16 int, out *[4]float32)
TEXT ·accum1x4(SB), NOSPLIT, $0-40
	MOVQ x0+0(FP), SI
	MOVQ w+8(FP), R8
	MOVQ K+16(FP), R9
	SHLQ $2, R9
	LEAQ (R8)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	LEAQ (R11)(R9*1), R12
	MOVQ k16+24(FP), CX
	SHLQ $2, CX
	MOVQ out+32(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ AX, AX
	CMPQ AX, CX
	JGE done1x4

loop1x4:
	VMOVUPS (SI)(AX*1), Z12
	VFMADD231PS (R8)(AX*1), Z12, Z0
	VFMADD231PS (R10)(AX*1), Z12, Z1
	VFMADD231PS (R11)(AX*1), Z12, Z2
	VFMADD231PS (R12)(AX*1), Z12, Z3
	ADDQ $64, AX
	CMPQ AX, CX
	JLT loop1x4

done1x4:
	HSUM(Z0, Y0, X0)
	HSUM(Z1, Y1, X1)
	HSUM(Z2, Y2, X2)
	HSUM(Z3, Y3, X3)
	MOVSS X0, 0(DX)
	MOVSS X1, 4(DX)
	MOVSS X2, 8(DX)
	MOVSS X3, 12(DX)
	VZEROUPPER
	RET

// func accum1x1(x0, w unsafe.Pointer, k16 int, out *float32)
TEXT ·accum1x1(SB), NOSPLIT, $0-32
	MOVQ x0+0(FP), SI
	MOVQ w+8(FP), R8
	MOVQ k16+16(FP), CX
	SHLQ $2, CX
	MOVQ out+24(FP), DX
	VPXORD Z0, Z0, Z0
	XORQ AX, AX
	CMPQ AX, CX
	JGE done1x1

loop1x1:
	VMOVUPS (SI)(AX*1), Z12
	VFMADD231PS (R8)(AX*1), Z12, Z0
	ADDQ $64, AX
	CMPQ AX, CX
	JLT loop1x1

done1x1:
	HSUM(Z0, Y0, X0)
	MOVSS X0, 0(DX)
	VZEROUPPER
	RET
