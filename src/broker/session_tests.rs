use super::*;

const B: BrokerId = BrokerId(2);

fn cfg() -> Config {
    Config {
        session_timeout: Tick(10),
        heartbeat_interval: Tick(2),
        ..Config::default()
    }
}

/// What the effects send, in order: `R` (registration, with its clean flag), `H` (heartbeat),
/// `lost`.
fn sent(effects: &[Effect<()>]) -> Vec<String> {
    effects
        .iter()
        .map(|e| match e {
            Effect::Send(Envelope {
                from,
                to: Node::Controller,
                message:
                    Message::BrokerRegistration {
                        broker,
                        clean_shutdown,
                    },
            }) if *from == Node::Broker(*broker) => format!("R{}", u8::from(*clean_shutdown)),
            Effect::Send(Envelope {
                from,
                to: Node::Controller,
                message: Message::BrokerHeartbeat { broker },
            }) if *from == Node::Broker(*broker) => "H".into(),
            Effect::SessionLost => "lost".into(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn step(s: &mut Session, now: u64, input: Input) -> Vec<String> {
    sent(&s.step::<()>(&cfg(), Tick(now), input))
}

/// An incarnation registers once, saying how its last run ended, on its first session; a
/// later session (a controller failover, a broken connection) resumes with heartbeats.
#[test]
fn the_first_session_registers_with_the_last_runs_ending_and_later_ones_resume() {
    for clean in [false, true] {
        let mut s = Session::new(B, clean);
        assert_eq!(
            step(&mut s, 0, Input::SessionOpened),
            [format!("R{}", u8::from(clean))]
        );
        step(&mut s, 1, Input::RegistrationAnswered);
        step(&mut s, 3, Input::SessionClosed);
        assert_eq!(s.next_timeout(&cfg()), None, "no session, no timer");
        assert!(step(&mut s, 4, Input::SessionOpened).is_empty());
        assert_eq!(step(&mut s, 4, Input::Tick), ["H"]);
    }
}

/// A fenced broker registers again, as clean: the process and its page cache lived on.
#[test]
fn a_fenced_broker_registers_again_as_clean() {
    let mut s = Session::new(B, false);
    step(&mut s, 0, Input::SessionOpened);
    step(&mut s, 1, Input::RegistrationAnswered);
    assert_eq!(step(&mut s, 5, Input::MustRegister), ["R1"]);
}

/// MustRegister answers to heartbeats the controller took before this broker's registration
/// are stale: only one after the registration's answer says the controller fenced it.
#[test]
fn must_register_before_the_registration_is_answered_is_stale() {
    let mut s = Session::new(B, true);
    step(&mut s, 0, Input::SessionOpened);
    assert!(step(&mut s, 1, Input::MustRegister).is_empty());
    assert!(step(&mut s, 1, Input::MustRegister).is_empty());
    step(&mut s, 2, Input::RegistrationAnswered);
    assert_eq!(step(&mut s, 3, Input::MustRegister), ["R1"]);
    assert!(step(&mut s, 3, Input::MustRegister).is_empty());
    // A registration whose answer the session's end lost: the next session's MustRegister is
    // obeyed.
    step(&mut s, 4, Input::SessionClosed);
    step(&mut s, 5, Input::SessionOpened);
    assert_eq!(step(&mut s, 6, Input::MustRegister), ["R1"]);
}

/// Heartbeats go out every interval, one after a stall however long (not one per interval
/// missed); a controller silent for a session is given up, once.
#[test]
fn heartbeats_every_interval_and_a_silent_controller_is_given_up() {
    let mut s = Session::new(B, true);
    step(&mut s, 0, Input::SessionOpened);
    step(&mut s, 0, Input::RegistrationAnswered);
    let mut beats = Vec::new();
    for now in 0..9 {
        if step(&mut s, now, Input::Tick) == ["H"] {
            beats.push(now);
        }
        step(&mut s, now, Input::HeartbeatAnswered);
    }
    assert_eq!(beats, [0, 2, 4, 6, 8]);
    assert_eq!(s.next_timeout(&cfg()), Some(Tick(10)));
    // A stall: the answers stop, and the next tick is late.
    assert_eq!(step(&mut s, 15, Input::Tick), ["H"]);
    assert_eq!(s.next_timeout(&cfg()), Some(Tick(17)));
    assert_eq!(step(&mut s, 17, Input::Tick), ["H"]);
    assert_eq!(
        s.next_timeout(&cfg()),
        Some(Tick(18)),
        "8 answered + a session"
    );
    assert_eq!(step(&mut s, 18, Input::Tick), ["lost"]);
    assert!(!s.is_open());
    assert!(step(&mut s, 30, Input::Tick).is_empty());
}

/// Once a controlled shutdown began the broker neither heartbeats nor registers, nor gives
/// up the controller it asked to fence it.
#[test]
fn a_stopping_broker_neither_heartbeats_nor_registers() {
    let mut s = Session::new(B, true);
    step(&mut s, 0, Input::SessionOpened);
    step(&mut s, 0, Input::RegistrationAnswered);
    step(&mut s, 1, Input::ControlledShutdown);
    assert!(s.is_stopping());
    assert_eq!(s.next_timeout(&cfg()), None);
    assert!(step(&mut s, 100, Input::Tick).is_empty());
    assert!(step(&mut s, 101, Input::MustRegister).is_empty());
    assert!(s.is_open());
    step(&mut s, 102, Input::SessionClosed);
    assert!(step(&mut s, 103, Input::SessionOpened).is_empty());
    // Never registered before the shutdown began: still no registration.
    let mut s = Session::new(B, false);
    step(&mut s, 0, Input::ControlledShutdown);
    assert!(step(&mut s, 1, Input::SessionOpened).is_empty());
}
