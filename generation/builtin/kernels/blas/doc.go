// Package blas is the optional OpenBLAS backend of package kernels, in its
// own package because Go does not allow cgo and Go assembly in one package.
// Its code builds only with the "openblas" tag (and cgo); kernels imports it
// then.
package blas
