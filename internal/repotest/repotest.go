// Package repotest holds repository-wide checks that are not about one
// package: every package has a doc comment, and the trajectory contract
// package imports nothing else of troupe.
package repotest
