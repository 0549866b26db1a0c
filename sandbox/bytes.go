package sandbox

import (
	"math"
	"strconv"
	"strings"
)

// ParseBytes parses a size such as "512M", "1.5GiB", "64k" or "1048576":
// an optional binary suffix K, M, G, T (×1024ⁿ; "KB", "KiB" and lower case
// mean the same) after a non-negative decimal number. A bare number is bytes.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRight(t, "bBiIkKmMgGtT")
	suffix := strings.ToUpper(t[len(num):])
	suffix = strings.TrimSuffix(strings.TrimSuffix(suffix, "B"), "I")
	shift := 0
	switch suffix {
	case "":
	case "K":
		shift = 10
	case "M":
		shift = 20
	case "G":
		shift = 30
	case "T":
		shift = 40
	default:
		return 0, errorf("size %q: unknown unit (use K, M, G or T)", s)
	}
	if suffix == "" && t != num && !strings.EqualFold(t[len(num):], "b") {
		return 0, errorf("size %q: unknown unit (use K, M, G or T)", s)
	}
	num = strings.TrimSpace(num)
	if num == "" || strings.ContainsAny(num, "+-eEnNxX_") {
		return 0, errorf("size %q: want a number with an optional unit, e.g. 512M", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, errorf("size %q: want a non-negative number with an optional unit, e.g. 512M", s)
	}
	v := math.Ldexp(f, shift)
	if v >= math.MaxInt64 {
		return 0, errorf("size %q: too large", s)
	}
	return int64(v), nil
}

// FormatBytes renders n the way ParseBytes reads it, exactly when possible
// ("512M", "1536K", "100").
func FormatBytes(n int64) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
