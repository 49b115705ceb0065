//! caucus correlator.
