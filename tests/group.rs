//! The consumer group at its coordinator (`isr::group`), driven tick by tick: what the runtime's
//! coordinator holds and waits for, here decided without a clock.

use isr::group::{Caller, Entered, Group, GroupError, Join, Synced};
use isr::{Rules, Tick};

fn join(member_id: &str, client: &str) -> Join {
    Join {
        member_id: member_id.into(),
        instance_id: None,
        client_id: client.into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), format!("{client}-sub").into_bytes())],
        session_timeout: 10,
        rebalance_timeout: 5,
        member_id_required: false,
    }
}

fn at(member_id: &str, generation: i32) -> Caller<'_> {
    Caller {
        member_id,
        instance_id: None,
        generation,
    }
}

fn waiting(entered: Result<Entered, GroupError>) -> String {
    match entered {
        Ok(Entered::Waiting(id)) => id,
        other => panic!("expected to wait, got {other:?}"),
    }
}

/// Two members in generation 2 (the first joined alone in 1, and rejoined when the second
/// came), the assignment not handed in yet: (leader, other).
fn pair(g: &mut Group) -> (String, String) {
    let a = waiting(g.join(&join("", "a"), Tick(0)));
    let alone = g
        .joined(&a, Tick(0))
        .expect("known")
        .expect("alone: at once");
    assert_eq!((alone.generation, alone.leader.as_str()), (1, a.as_str()));
    let b = waiting(g.join(&join("", "b"), Tick(0)));
    assert_eq!(g.joined(&b, Tick(0)), Ok(None), "waits for a to rejoin");
    assert_eq!(
        g.heartbeat(at(&a, 1), Tick(0)),
        Err(GroupError::RebalanceInProgress)
    );
    let a = waiting(g.join(&join(&a, "a"), Tick(0)));
    let a2 = g.joined(&a, Tick(0)).expect("known").expect("complete");
    let b2 = g.joined(&b, Tick(0)).expect("known").expect("complete");
    assert_eq!((a2.generation, b2.generation), (2, 2));
    assert_eq!(a2.leader, a, "the leader stays");
    assert_eq!(a2.members.len(), 2, "the leader sees every member");
    assert!(b2.members.is_empty());
    (a, b)
}

/// [`pair`], with the leader's assignment handed in and stored.
fn stable_pair(g: &mut Group) -> (String, String) {
    let (leader, other) = pair(g);
    let plan = vec![
        (leader.clone(), b"p0".to_vec()),
        (other.clone(), b"p1".to_vec()),
    ];
    let Ok(Synced::Store(stored)) = g.sync(at(&leader, 2), None, &plan, Tick(1)) else {
        panic!("the leader's sync asks for the generation to be stored");
    };
    assert_eq!((stored.generation, stored.members.len()), (2, 2));
    g.stored_result(2, true, Tick(1));
    (leader, other)
}

#[test]
fn no_member_learns_its_assignment_before_the_generation_is_stored() {
    let mut g = Group::default();
    let (leader, other) = pair(&mut g);
    assert_eq!(g.sync(at(&other, 2), None, &[], Tick(1)), Ok(Synced::Wait));
    let plan = vec![(other.clone(), b"p1".to_vec())];
    assert!(matches!(
        g.sync(at(&leader, 2), None, &plan, Tick(1)),
        Ok(Synced::Store(_))
    ));
    assert_eq!(
        g.sync(at(&other, 2), None, &[], Tick(2)),
        Ok(Synced::Wait),
        "handed in, not stored"
    );
    assert_eq!(
        g.may_commit(&Rules::default(), at(&other, 2), Tick(2)),
        Err(GroupError::RebalanceInProgress)
    );
    g.stored_result(2, true, Tick(2));
    assert_eq!(
        g.sync(at(&other, 2), None, &[], Tick(3)),
        Ok(Synced::Assignment(b"p1".to_vec()))
    );
    assert_eq!(
        g.may_commit(&Rules::default(), at(&other, 2), Tick(3)),
        Ok(())
    );
}

#[test]
fn a_failed_store_rebalances_and_the_assignment_is_never_handed_out() {
    let mut g = Group::default();
    let (leader, other) = pair(&mut g);
    let plan = vec![(other.clone(), b"p1".to_vec())];
    assert!(matches!(
        g.sync(at(&leader, 2), None, &plan, Tick(1)),
        Ok(Synced::Store(_))
    ));
    g.stored_result(2, false, Tick(1));
    assert_eq!(
        g.sync(at(&other, 2), None, &[], Tick(1)),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(g.describe().state, "PreparingRebalance");
}

/// FencedMembersCannotCommit: after a rebalance moves the group on, a commit in the older
/// generation is refused, at the same coordinator and at one that loaded the group.
#[test]
fn a_member_of_an_older_generation_cannot_commit() {
    let mut g = Group::default();
    let (leader, other) = stable_pair(&mut g);
    assert_eq!(
        g.may_commit(&Rules::default(), at(&other, 2), Tick(2)),
        Ok(())
    );
    // The other member goes silent: its session (10 ticks) runs out, the leader rejoins alone.
    for t in [5, 10] {
        assert_eq!(g.heartbeat(at(&leader, 2), Tick(t)), Ok(()));
    }
    assert_eq!(
        g.heartbeat(at(&leader, 2), Tick(13)),
        Err(GroupError::RebalanceInProgress),
        "the other expired: silent since its commit at tick 2"
    );
    let again = waiting(g.join(&join(&leader, "a"), Tick(13)));
    let joined = g.joined(&again, Tick(13)).expect("known").expect("alone");
    assert_eq!(joined.generation, 3);
    assert_eq!(
        g.may_commit(&Rules::default(), at(&other, 2), Tick(14)),
        Err(GroupError::UnknownMember),
        "the zombie is not a member any more"
    );
    assert_eq!(
        g.may_commit(&Rules::default(), at(&leader, 2), Tick(14)),
        Err(GroupError::IllegalGeneration)
    );
    let mut loaded = Group::from_stored(g.stored(), Tick(20));
    assert_eq!(
        loaded.may_commit(&Rules::default(), at(&leader, 2), Tick(20)),
        Err(GroupError::IllegalGeneration),
        "a loaded coordinator fences it too"
    );
}

#[test]
fn a_loaded_group_carries_on_and_its_silent_members_expire_from_the_load() {
    let mut g = Group::default();
    let (leader, other) = stable_pair(&mut g);
    let mut next = Group::from_stored(g.stored(), Tick(100));
    assert_eq!(next.describe().state, "Stable");
    assert_eq!(next.heartbeat(at(&leader, 2), Tick(105)), Ok(()));
    assert_eq!(
        next.sync(at(&other, 2), None, &[], Tick(105)),
        Ok(Synced::Assignment(b"p1".to_vec()))
    );
    // Only the leader keeps heartbeating: the other expires 10 ticks after its last sign.
    assert_eq!(next.heartbeat(at(&leader, 2), Tick(114)), Ok(()));
    assert_eq!(
        next.heartbeat(at(&leader, 2), Tick(116)),
        Err(GroupError::RebalanceInProgress)
    );
    // A newcomer never gets an id a loaded member holds.
    let newcomer = waiting(next.join(&join("", "a"), Tick(116)));
    assert_ne!(newcomer, leader);
}

/// KIP-394: a new member of JoinGroup v4+ is given its id and joins again with it; until then
/// the id is reserved, not a member (the group does not wait for it), and it is forgotten after
/// its session timeout.
#[test]
fn a_new_member_joins_again_with_the_id_it_is_given() {
    let asking = |member_id: &str, client: &str| Join {
        member_id_required: true,
        ..join(member_id, client)
    };
    let mut g = Group::default();
    let Ok(Entered::MemberIdRequired(a)) = g.join(&asking("", "a"), Tick(0)) else {
        panic!("a new member without an id is asked to join again");
    };
    assert!(!g.describe().members.iter().any(|m| m.member_id == a));
    // Another member's rebalance completes without the reserved id.
    let Ok(Entered::MemberIdRequired(b)) = g.join(&asking("", "b"), Tick(0)) else {
        panic!("b is asked too");
    };
    assert_ne!(a, b, "ids are not handed out twice");
    let b = waiting(g.join(&asking(&b, "b"), Tick(1)));
    let alone = g.joined(&b, Tick(1)).expect("known").expect("b alone");
    assert_eq!(alone.members.len(), 1, "the reserved id is no member");
    // a comes back with its id within its session: it joins (a rebalance with b).
    let a = waiting(g.join(&asking(&a, "a"), Tick(5)));
    assert_eq!(g.joined(&a, Tick(5)), Ok(None), "waits for b to rejoin");
    // An id given out and not used within its session timeout is forgotten.
    let Ok(Entered::MemberIdRequired(c)) = g.join(&asking("", "c"), Tick(5)) else {
        panic!("c is asked");
    };
    assert_eq!(
        g.join(&asking(&c, "c"), Tick(20)).err(),
        Some(GroupError::UnknownMember)
    );
}

/// `group.initial.rebalance.delay.ms`: the first member of an empty group waits for others,
/// each newcomer extends the wait (within the rebalance timeout), and consumers started
/// together share generation 1 instead of a rebalance each.
#[test]
fn an_empty_group_waits_the_initial_delay_for_more_members() {
    let mut g = Group::default().with_initial_delay(3);
    let a = waiting(g.join(&join("", "a"), Tick(0)));
    assert_eq!(g.joined(&a, Tick(2)), Ok(None), "within the delay");
    let b = waiting(g.join(&join("", "b"), Tick(2)));
    assert_eq!(g.joined(&a, Tick(4)), Ok(None), "b extended the delay to 5");
    let a1 = g.joined(&a, Tick(5)).expect("known").expect("complete");
    let b1 = g.joined(&b, Tick(5)).expect("known").expect("complete");
    assert_eq!((a1.generation, b1.generation), (1, 1));
    assert_eq!(a1.members.len(), 2, "one generation for both");
    // Without the delay the first member has a generation to itself.
    let mut g = Group::default();
    let a = waiting(g.join(&join("", "a"), Tick(0)));
    let alone = g.joined(&a, Tick(0)).expect("known").expect("at once");
    assert_eq!((alone.generation, alone.members.len()), (1, 1));
    // A rebalance of a group with members is not delayed.
    let mut g = Group::default().with_initial_delay(3);
    let a = waiting(g.join(&join("", "a"), Tick(0)));
    g.joined(&a, Tick(3))
        .expect("known")
        .expect("after the delay");
    let b = waiting(g.join(&join("", "b"), Tick(3)));
    let a = waiting(g.join(&join(&a, "a"), Tick(3)));
    let a2 = g.joined(&a, Tick(3)).expect("known").expect("at once");
    assert_eq!(
        (
            a2.generation,
            g.joined(&b, Tick(3)).map(|j| j.map(|j| j.generation))
        ),
        (2, Ok(Some(2)))
    );
}
