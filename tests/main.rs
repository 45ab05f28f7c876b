/*!
The integration tests: one test binary (`autotests = false` in Cargo.toml) that runs the real
`fsync` executable as separate processes, the way users and their scripts do.

`harness` holds the temp directory, the command builder and the `Holder`; one module per
primitive holds its tests.
*/

mod architecture;
mod bad_input;
mod bus;
mod ccr;
mod chaos;
mod chaos_queue;
mod crash_model;
mod crash_states;
mod event;
mod examples;
mod faults;
mod flock_compat;
mod flock_verb;
mod group;
mod grouplock;
mod harness;
mod json;
mod msg;
mod msg_batch;
mod msg_jobs;
mod msg_kill;
mod msg_output;
mod msg_priority;
mod msg_status;
mod mutex;
mod netfs;
mod packaging;
mod range;
mod security;
mod sem;
mod sharing;
mod signals;
mod swmr;
mod verbose;
