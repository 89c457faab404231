// batch.hpp — fill the masks of many matchers at once on a persistent worker pool.
//
// The pool is created on first use with one worker per hardware thread (minus the caller, who
// works too) and lives for the process, so a decode step pays a wake-up, not thread creation.
// Rows are handed out by an atomic counter, so uneven per-row costs balance themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "matcher.hpp"

namespace corral {

/// matchers[i] writes its mask to rows[i] (each mask_words() words). `threads` = 0 uses every
/// hardware thread; 1 runs on the caller only. Exceptions cannot escape: a matcher turns its
/// own failures into its error state.
void fill_next_token_bitmasks(const std::vector<Matcher*>& matchers, const std::vector<std::int32_t*>& rows,
                              std::size_t threads);

}  // namespace corral
