// Package datasets loads problems for the environments: JSONL and Parquet
// files in Hugging Face layouts, seeded generators, and the small samples
// shipped under datasets/samples. A loader that cannot read a record names
// the file and line; it never silently falls back to a default problem.
package datasets
