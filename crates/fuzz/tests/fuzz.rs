//! The fuzz harness's bounded run, part of the normal test suite: a few thousand inputs per
//! target (seconds), each a fresh seed unless `JETPROOF_SEED` is set, printed on failure. The
//! long run (`docs/fuzz.md`): `JETPROOF_FUZZ_INPUTS=1000000 cargo nextest run -p jetproof-fuzz
//! --release --profile long --no-capture`. One input again: `JETPROOF_SEED=S
//! JETPROOF_FUZZ_REPLAY=I`.

use jetproof_fuzz::{Target, inputs_from_env, replay_from_env, run, targets};

fn fuzz(target: Target, default_inputs: u64) {
    let seed = jetproof_test_support::announced_seed(&format!("fuzz {}", target.name));
    let figures = run(
        &target,
        seed,
        inputs_from_env(default_inputs),
        replay_from_env(),
    );
    eprintln!("{}", figures.summary());
    if let Some(first) = figures.crashes.first() {
        let path = std::env::temp_dir().join(format!(
            "jetproof-fuzz-{}-{seed}-{}.bin",
            target.name, first.index
        ));
        let _ = std::fs::write(&path, &first.input);
        panic!(
            "fuzz {}: {} crashes; the first, input {} (saved as {}; replay with \
             JETPROOF_SEED={seed} JETPROOF_FUZZ_REPLAY={}): {}",
            target.name,
            figures.crashes.len(),
            first.index,
            path.display(),
            first.index,
            first.message
        );
    }
    assert!(figures.inputs > 0, "no input ran");
}

#[test]
fn fuzz_job_parser_and_checker() {
    fuzz(targets::job(), 10_000);
}

#[test]
fn fuzz_result_json_reader() {
    fuzz(targets::result_json(), 3_000);
}

#[test]
fn fuzz_samples_csv_reader() {
    fuzz(targets::samples_csv(), 1_000);
}

#[test]
fn fuzz_log_decoders() {
    fuzz(targets::log(), 100_000);
}

#[test]
fn fuzz_page_decoders() {
    fuzz(targets::page(), 100_000);
}

/// The harness itself: an input is a function of the seed and its index alone (so a replay
/// finds the same bytes), inputs differ, and a panicking check is caught and reported as a crash.
#[test]
fn inputs_replay_and_a_panic_is_a_crash() {
    let target = targets::job();
    assert_eq!(
        jetproof_fuzz::input(&target, 7, 123),
        jetproof_fuzz::input(&target, 7, 123)
    );
    assert_ne!(
        jetproof_fuzz::input(&target, 7, 123),
        jetproof_fuzz::input(&target, 7, 124)
    );
    let panicking = Target {
        name: "panics",
        corpus: vec![b"x".to_vec()],
        text: false,
        check: |bytes| {
            if bytes.len() > 1 {
                panic!("too long");
            }
            Ok(())
        },
    };
    let figures = run(&panicking, 1, 200, None);
    assert_eq!(figures.inputs, 200);
    assert!(!figures.crashes.is_empty());
    assert!(
        figures.crashes[0].message.contains("too long"),
        "{:?}",
        figures.crashes[0]
    );
}
