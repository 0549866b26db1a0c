//go:build openblas && cgo

package blas

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
extern void openblas_set_num_threads(int);
*/
import "C"

import "unsafe"

// The engine parallelises by splitting the output range across its own
// workers, so OpenBLAS runs single-threaded (its own threads would spin
// against ours on the same cores).
func init() { C.openblas_set_num_threads(1) }

// MatMulT is kernels.MatMulT through cblas_sgemm (row-major, B transposed).
func MatMulT(y []float32, ldy int, x []float32, M, K int, w []float32, o0, o1 int) {
	C.cblas_sgemm(C.CblasRowMajor, C.CblasNoTrans, C.CblasTrans,
		C.blasint(M), C.blasint(o1-o0), C.blasint(K), 1,
		(*C.float)(unsafe.Pointer(&x[0])), C.blasint(K),
		(*C.float)(unsafe.Pointer(&w[o0*K])), C.blasint(K), 0,
		(*C.float)(unsafe.Pointer(&y[o0])), C.blasint(ldy))
}
