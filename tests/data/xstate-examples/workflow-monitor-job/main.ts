import { assign, fromPromise, createActor, setup } from 'xstate';

interface Job {
  name: string;
}

// https://github.com/serverlessworkflow/specification/tree/main/examples#monitor-job-example
export const workflow = setup({
  types: {
    context: {} as {
      job: Job;
      jobuid: string | undefined;
      jobStatus: 'SUCCEEDED' | 'FAILED' | undefined;
    },
    input: {} as {
      job: Job;
    }
  },
  actors: {
    submitJob: fromPromise(async ({ input }: { input: { name: string } }) => {
      console.log('Starting submitJob', input);
      return { jobuid: '123' };
    }),
    checkJobStatus: fromPromise(
      async ({ input }: { input: { name: string } }) => {
        console.log('Starting checkJobStatus', input);
        return { jobStatus: 'SUCCEEDED' as const };
      }
    ),
    reportJobSucceeded: fromPromise(({ input }) => {
      console.log('Starting reportJobSucceeded', input);
      return Promise.resolve();
    }),
    reportJobFailed: fromPromise(({ input }) => {
      console.log('Starting reportJobFailed', input);
      return Promise.resolve();
    })
  }
}).createMachine({
  id: 'jobmonitoring',
  initial: 'SubmitJob',

  context: ({ input }) => ({
    job: input.job,
    jobuid: undefined,
    jobStatus: undefined
  }),
  states: {
    SubmitJob: {
      invoke: {
        src: 'submitJob',
        input: ({ context }) => ({
          name: context.job.name
        }),
        onDone: {
          target: 'WaitForCompletion',
          actions: assign({
            jobuid: ({ event }) => event.output.jobuid
          })
        }
      }
    },
    WaitForCompletion: {
      after: {
        5000: 'GetJobStatus'
      }
    },
    GetJobStatus: {
      invoke: {
        src: 'checkJobStatus',
        input: ({ context }) => ({
          name: context.jobuid
        }),
        onDone: {
          target: 'DetermineCompletion',
          actions: assign({
            jobStatus: ({ event }) => event.output.jobStatus
          })
        }
      }
    },
    DetermineCompletion: {
      always: [
        {
          guard: ({ context }) => context.jobStatus === 'SUCCEEDED',
          target: 'JobSucceeded'
        },
        {
          guard: ({ context }) => context.jobStatus === 'FAILED',
          target: 'JobFailed'
        },
        {
          target: 'WaitForCompletion'
        }
      ]
    },
    JobSucceeded: {
      invoke: {
        src: 'reportJobSucceeded',
        onDone: 'End'
      }
    },
    JobFailed: {
      invoke: {
        src: 'reportJobFailed',
        onDone: 'End'
      }
    },
    End: {
      type: 'final'
    }
  }
});

const actor = createActor(workflow, {
  input: {
    job: {
      name: 'job1'
    }
  }
});

actor.subscribe({
  complete() {
    console.log('workflow completed', actor.getSnapshot().output);
  }
});

actor.start();
