import AllocCounter
import Testing
@testable import LocusCore

/// The self-healing's decisions on a made-up clock, and the config that feeds them.
@Suite struct HealLadderTests {
    static let s: Int64 = 1_000_000_000
    static func counts(_ values: InlineArray<4, Int>) -> [Int] { (0..<4).map { values[$0] } }
    func at(_ seconds: Double) -> MonotonicInstant { MonotonicInstant(nanoseconds: Int64(seconds * 1e9)) }

    @Test func silenceStartsTheStepsInOrderRoundAfterRoundThenItGivesUpOnce() {
        var ladder = HealLadder(silenceMs: 10_000, settleMs: 5_000, rounds: 2, stepCount: 3, now: at(0))
        #expect(ladder.nextDeadline == at(10))
        #expect(ladder.decide(at(9.999)) == nil)
        #expect(ladder.decide(at(10)) == .step(0, round: 1, silentNs: 10 * Self.s))
        #expect(ladder.nextDeadline == at(15) && ladder.isHealing)
        #expect(ladder.decide(at(14)) == nil)
        #expect(ladder.decide(at(15)) == .step(1, round: 1, silentNs: 15 * Self.s))
        #expect(ladder.decide(at(20)) == .step(2, round: 1, silentNs: 20 * Self.s))
        #expect(ladder.decide(at(25)) == .step(0, round: 2, silentNs: 25 * Self.s))
        #expect(ladder.decide(at(30)) == .step(1, round: 2, silentNs: 30 * Self.s))
        #expect(ladder.decide(at(35)) == .step(2, round: 2, silentNs: 35 * Self.s))
        #expect(ladder.decide(at(40)) == .giveUp(silentNs: 40 * Self.s))
        #expect(ladder.givenUp && ladder.nextDeadline == nil && ladder.decide(at(1_000)) == nil, "given up once")
        #expect(Self.counts(ladder.taken) == [2, 2, 2, 0] && ladder.episodes == 1 && ladder.giveUps == 1)
        // Heard again after giving up: by itself, no step credited; a new silence starts afresh.
        #expect(ladder.heard(at(50)) == HealLadder.Recovery(step: 2, round: 2, silentNs: 50 * Self.s, afterGivingUp: true))
        #expect(Self.counts(ladder.healed) == [0, 0, 0, 0] && !ladder.givenUp && ladder.nextDeadline == at(60))
        #expect(ladder.decide(at(60)) == .step(0, round: 1, silentNs: 10 * Self.s))
        #expect(ladder.episodes == 2)
    }

    @Test func theStepBeforeTheRadioSpeaksIsCredited() {
        var ladder = HealLadder(silenceMs: 10_000, settleMs: 5_000, rounds: 2, stepCount: 2, now: at(0))
        #expect(ladder.heard(at(3)) == nil, "no episode: nothing to report")
        #expect(ladder.decide(at(13)) == .step(0, round: 1, silentNs: 10 * Self.s))
        #expect(ladder.decide(at(18)) == .step(1, round: 1, silentNs: 15 * Self.s))
        #expect(ladder.heard(at(19.5)) == HealLadder.Recovery(step: 1, round: 1, silentNs: Int64(16.5 * 1e9), afterGivingUp: false))
        #expect(Self.counts(ladder.healed) == [0, 1, 0, 0] && !ladder.isHealing && ladder.nextDeadline == at(29.5))
        let names = ["scan restart", "controller reset"]
        #expect(HealLadder.Recovery(step: 1, round: 2, silentNs: 47 * Self.s, afterGivingUp: false).text { names[$0] }
                == "after 47 s of silence; healed by the controller reset (round 2)")
        #expect(HealLadder.Recovery(step: 1, round: 2, silentNs: 130 * Self.s, afterGivingUp: true).text { names[$0] }
                == "after 2 min of silence (by itself, after the self-healing gave up)")
    }

    /// Not expected to speak (port closed, receiver asleep): silence does not count, and a ladder
    /// under way keeps its place with a fresh settle once it is expected again.
    @Test func holdingPausesTheSilenceAndKeepsTheLaddersPlace() {
        var ladder = HealLadder(silenceMs: 10_000, settleMs: 5_000, rounds: 1, stepCount: 3, now: at(0))
        ladder.hold(at(8))
        #expect(ladder.nextDeadline == at(18), "silence counts from when it is expected again")
        #expect(ladder.decide(at(18)) == .step(0, round: 1, silentNs: 10 * Self.s))
        ladder.hold(at(20))
        ladder.hold(at(40))
        #expect(ladder.nextDeadline == at(45))
        #expect(ladder.decide(at(45)) == .step(1, round: 1, silentNs: 37 * Self.s), "the second step, not the first again")
        ladder.postpone(at(47))
        #expect(ladder.nextDeadline == at(52), "a power cut of 2 s: its settle starts when the supply is back")
        ladder.postpone(at(40))
        #expect(ladder.nextDeadline == at(52), "never earlier")
        ladder.reset(at(46))
        #expect(!ladder.isHealing && ladder.nextDeadline == at(56))
    }

    /// An unanswered command starts the ladder at once (the silence limit is counted as passed),
    /// but does not hurry a ladder under way.
    @Test func anUnansweredCommandStartsTheLadderAtOnce() {
        var ladder = HealLadder(silenceMs: 300_000, settleMs: 20_000, rounds: 2, stepCount: 4, now: at(0))
        ladder.unanswered(at(12))
        #expect(ladder.nextDeadline == at(12))
        #expect(ladder.decide(at(12)) == .step(0, round: 1, silentNs: 12 * Self.s), "the silence as it was")
        ladder.unanswered(at(13))
        #expect(ladder.nextDeadline == at(32), "the step under way keeps its settle")
        var off = HealLadder(silenceMs: 0, settleMs: 20_000, rounds: 2, stepCount: 4, now: at(0))
        off.unanswered(at(5))
        #expect(off.nextDeadline == nil)
        var heard = HealLadder(silenceMs: 300_000, settleMs: 20_000, rounds: 2, stepCount: 4, now: at(0))
        heard.unanswered(at(5))
        _ = heard.heard(at(6))
        #expect(heard.nextDeadline == at(306), "an answer after all: back to the silence limit")
    }

    @Test func zeroSilenceIsOffAndNoStepsMeansGivingUpAtOnce() {
        var off = HealLadder(silenceMs: 0, settleMs: 5_000, rounds: 2, stepCount: 2, now: at(0))
        #expect(off.nextDeadline == nil && off.decide(at(1_000_000)) == nil)
        var bare = HealLadder(silenceMs: 10_000, settleMs: 5_000, rounds: 2, stepCount: 0, now: at(0))
        #expect(bare.decide(at(10)) == .giveUp(silentNs: 10 * Self.s))
        #expect(bare.heard(at(11)) == HealLadder.Recovery(step: nil, round: 1, silentNs: 11 * Self.s, afterGivingUp: true))
    }

    @Test func decidingAndHearingAllocateNothing() {
        var ladder = HealLadder(silenceMs: 10_000, settleMs: 5_000, rounds: 2, stepCount: 3, now: at(0))
        let count = allocations {
            for second in 0..<100 {
                _ = ladder.decide(at(Double(second)))
                if second % 37 == 0 { _ = ladder.heard(at(Double(second))) }
                ladder.hold(at(Double(second) + 0.5))
            }
        }
        #expect(count == 0)
    }

    @Test func statusNamesEachStep() {
        var ladder = HealLadder(silenceMs: 10_000, settleMs: 5_000, rounds: 1, stepCount: 2, now: at(0))
        _ = ladder.decide(at(10))
        var line = JSONWriter(capacity: 256)
        line.text("{")
        ladder.status(into: &line, names: ["plan", "reset"], now: at(12))
        line.text("}")
        #expect(line.string == "{\"health\":{\"silent_s\":12,\"silence_limit_s\":10,\"episodes\":1,\"steps\":{\"plan\":1,\"reset\":0},"
                + "\"healed_by\":{\"plan\":0,\"reset\":0},\"healing\":true,\"given_up\":false}}")
    }
}

/// The board's radio lines and the site's `[health]`.
@Suite struct RadioLineConfigTests {
    static let board = "[board]\nname = \"b\"\n[gnss]\ndevice = \"/dev/ttyS0\"\nreceiver = \"ublox\"\n"

    @Test func radioLinesNameBoardOutputsAndActionsCannotDriveThem() throws {
        let text = Self.board + "power_line = \"gnss_power\"\npower_off = \"3s\"\nreset_line = \"gnss_reset\"\n"
            + "[gpio]\nsimulated = true\n[gpio.outputs]\nrelay1 = { line = 0 }\ngnss_power = { line = 1, safe = 1 }\ngnss_reset = { line = 2 }\n"
        let board = try BoardConfig.parse(Array(text.utf8), file: "board.toml")
        #expect(board.gnss?.lines == {
            var lines = BoardConfig.RadioLines()
            lines.power = "gnss_power"
            lines.powerOffMs = 3_000
            lines.reset = "gnss_reset"
            return lines
        }())
        #expect(board.radioLines == ["gnss_power", "gnss_reset"])
        let config = try site("board = \"b\"\n[[monitor.g.condition]]\nid = \"a\"\ncircle = { lat = 1, lon = 1, radius = 1 }\n[[action]]\nwhen = \"g/a\"\ngpio = \"gnss_power\"\n")
        #expect(config.problems(with: board, file: "site.toml").map { $0.description } ==
                ["site.toml:5:1: gpio 'gnss_power' powers or resets a radio (the board's [gnss] or [bluetooth] lines): the agent's self-healing drives it, actions cannot"])

        #expect(boardErrors(Self.board + "power_line = \"gnss_pwr\"\n[gpio]\nsimulated = true\n[gpio.outputs]\ngnss_power = { line = 1 }\n")
                == ["board.toml:6:14: 'gnss.power_line' = \"gnss_pwr\" is not one of the board's [gpio.outputs] (did you mean 'gnss_power'?)"])
        #expect(boardErrors(Self.board + "power_line = \"x\"\nreset_line = \"x\"\n[gpio]\nsimulated = true\n[gpio.outputs]\nx = { line = 1 }\n")
                == ["board.toml:7:14: 'gnss.reset_line' and 'gnss.power_line' both name output 'x'"])
        let adapter = try BoardConfig.parse(Array((Self.board + "[bluetooth]\nhci = 0\npower_line = \"bt_power\"\npower_off = \"1s\"\n"
            + "[gpio]\nsimulated = true\n[gpio.outputs]\nbt_power = { line = 1, safe = 1 }\n").utf8), file: "board.toml")
        #expect(adapter.bluetoothLines.power == "bt_power" && adapter.bluetoothLines.powerOffMs == 1_000 && adapter.radioLines == ["bt_power"])
        #expect(boardErrors(Self.board + "[bluetooth]\nhci = 0\npower_line = \"bt\"\n")
                == ["board.toml:8:14: 'bluetooth.power_line' = \"bt\" is not one of the board's [gpio.outputs]"])
        #expect(boardErrors(Self.board + "power_off = \"10ms\"\n") == ["board.toml:6:13: 'gnss.power_off' = \"10ms\" is out of range (100ms...1min)"])
    }

    @Test func healthSettings() throws {
        let defaults = try site("board = \"b\"\n")
        #expect(defaults.health == SiteConfig.Health() && defaults.health.gnssSilenceMs == 15_000 && defaults.health.rounds == 2)
        let set = try site("board = \"b\"\n[health]\ngnss_silence = \"1min\"\nsettle = \"30s\"\nrounds = 3\n")
        #expect(set.health.gnssSilenceMs == 60_000 && set.health.settleMs == 30_000 && set.health.rounds == 3)
        #expect(try site("board = \"b\"\n[health]\ngnss_silence = \"0s\"\n").health.gnssSilenceMs == 0)
        #expect(siteErrors("board = \"b\"\n[health]\ngnss_silence = \"500ms\"\n") == ["site.toml:3:16: 'health.gnss_silence' must be \"0s\" (off) or at least 2s"])
        #expect(siteErrors("board = \"b\"\n[health]\nrounds = 0\n").count == 1)
        #expect(defaults.health.bleSilenceMs == 300_000)
        #expect(try site("board = \"b\"\n[health]\nble_silence = \"2min\"\n").health.bleSilenceMs == 120_000)
        #expect(siteErrors("board = \"b\"\n[health]\nble_silence = \"5s\"\n") == ["site.toml:3:15: 'health.ble_silence' must be \"0s\" (off) or at least 10s"])
        #expect(siteErrors("board = \"b\"\n[health]\nble = 1\n").count == 1, "unknown keys are refused")
    }
}
