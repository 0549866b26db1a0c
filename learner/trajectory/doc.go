// Package trajectory is the contract between rollout and learner: the row
// schema of a trajectory shard ([Step], one row per LLM call), the Parquet
// [Writer] and [Reader] for shards, and the per-run shard [Manifest]. It
// imports nothing else of troupe, so both halves (and outside tools) can
// depend on it alone.
//
// # Files
//
// A run's shards live in runs/<run>/trajectories/. One rollout batch is one
// shard named iter-NNNNNN-TAG.parquet (six-digit zero-padded iteration, TAG
// unique per writer; see [ShardName]). Shards are Parquet with ZSTD pages,
// data page v2, dictionary encoding for low-cardinality strings, PLAIN for
// token ids and logprobs, and row groups of about 64 MiB of logical
// (uncompressed) data, encoded in parallel and spliced into the file in
// order. Lists are standard 3-level LIST columns and
// created_at is TIMESTAMP(MICROS, UTC), so DuckDB, pyarrow and pandas read
// every shard as is. The column names are the parquet tags of [Step]
// (snake_case, see [Columns]).
//
// # Atomicity
//
// A [Writer] writes to a hidden temporary name in the target directory
// (".iter-….parquet.tmp-*"), holds an exclusive flock on it while writing,
// and on [Writer.Commit] fsyncs the file, renames it to its final name and
// fsyncs the directory. A reader listing the directory therefore sees a
// shard complete or not at all; a writer that is killed leaves only a
// temporary file, which [OpenManifest] (or [CleanTemp]) removes once no
// process holds its lock. [Writer.Abort] removes it at once.
//
// # Reading
//
// [Open] reads the footer and validates the schema: columns are matched by
// name, unknown columns are ignored, and a missing column reads as the zero
// value unless it was projected explicitly (then Open fails). Physical
// types are converted where lossless (any integer width to the field's, FLOAT
// and DOUBLE to float fields, optional columns whose nulls read as zero).
// [Reader.All] yields rows as an iter.Seq2; [ReadOptions] selects columns
// (projection) and filters rows by iteration, role and split. Decoding is
// columnar and row groups are decoded in parallel.
//
// Every failure caused by the file itself (truncated, corrupt, not
// Parquet, a column of an unusable type) is a *[FileError] that names the
// file and reports BadInput() == true, which troupe's CLI maps to exit code
// 2. Readers never panic on bad input: the footer's Thrift structure is
// validated before parquet-go decodes it (so a corrupt length cannot ask
// for gigabytes), data pages are checked against their CRC-32, panics
// inside the Parquet library are recovered, and LZ4-compressed files are
// refused (parquet-go v0.32.0 loops forever on corrupt LZ4 blocks).
//
// Precision: created_at keeps microseconds (UTC); floats and integers
// round-trip exactly; empty lists read back as nil.
//
// # Manifest
//
// manifest.json in the trajectories directory records every committed
// shard and whether the learner has consumed it; see [Manifest] for the
// protocol and its crash windows.
package trajectory
