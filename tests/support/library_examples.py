"""Example machines from the documentation of the libraries the adapters wrap, as their users
write them: python-statemachine's `TrafficLightMachine` (its README's first example; a
cycle with no final state) and `transitions`' `Matter` (its README's first example; no state
marked final, `plasma` has no way out and `solid` cannot be reached from `liquid`). The
adapters must fuzz them as they are."""
from statemachine import State, StateMachine
from transitions import Machine

from harness.adapters import statemachine_target, transitions_target


class TrafficLightMachine(StateMachine):
    "A traffic light machine"   # python-statemachine's README example
    green = State(initial=True)
    yellow = State()
    red = State()

    cycle = (
        green.to(yellow)
        | yellow.to(red)
        | red.to(green)
    )

    def __init__(self, box):
        super().__init__()

    def before_cycle(self, event: str, source: State, target: State, message: str = ""):
        message = ". " + message if message else ""
        return f"Running {event} from {source.id} to {target.id}{message}"

    def on_enter_red(self):
        pass

    def on_exit_red(self):
        pass


class Matter:  # transitions' README example
    def __init__(self, box):
        states = ['solid', 'liquid', 'gas', 'plasma']
        transitions = [
            {'trigger': 'melt', 'source': 'solid', 'dest': 'liquid'},
            {'trigger': 'evaporate', 'source': 'liquid', 'dest': 'gas'},
            {'trigger': 'sublimate', 'source': 'solid', 'dest': 'gas'},
            {'trigger': 'ionize', 'source': 'gas', 'dest': 'plasma'},
        ]
        self.machine = Machine(model=self, states=states, transitions=transitions, initial='liquid')


traffic_light = statemachine_target(TrafficLightMachine, name="traffic_light")
matter = transitions_target(Matter, name="matter")
