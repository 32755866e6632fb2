"""The generic layer names what frameworks print at each place of a job's life, whatever the
framework: lines as their source prints them (the source is cited beside each shape in
rules/generic.yaml), read by the generic layer alone, no pack loaded."""

from __future__ import annotations

import functools

import pytest

from hangwatch.core.databases import compile_database
from hangwatch.core.rules import RuleSet
from hangwatch.core.translate import line_forms
from hangwatch.packs.load import load_builtin_packs, load_rule_set

NAMED = [
    # distributed init: TensorFlow, JAX, DeepSpeed, accelerate, c10d, torchelastic (NCCL's own
    # INFO lines are the torch-distributed pack's, loaded whatever the framework: a generic
    # word for them would make every one of thousands of start-up lines a phase START)
    ("INFO:tensorflow:Using MirroredStrategy with devices ('/job:localhost/replica:0/task:0/"
     "device:GPU:0',)", "distributed_init"),
    ("Enabled multi-worker collective ops with available devices: ['/job:worker/replica:0/"
     "task:0/device:CPU:0']", "distributed_init"),
    ("Connecting to JAX distributed service on 10.0.0.1:1234", "distributed_init"),
    ("[INFO] [comm.py:637:init_distributed] Initializing TorchBackend in DeepSpeed with "
     "backend nccl", "distributed_init"),
    ("Distributed environment: MULTI_GPU  Backend: nccl", "distributed_init"),
    ("[I socket.cpp:480] [c10d] The server socket has started to listen on [::]:29500.",
     "distributed_init"),
    ("INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group",
     "distributed_init"),
    # a model built or loaded
    ("Building model...", "model_load"),
    ("=> creating model 'resnet50'", "model_load"),
    ("Creating model: vit_base_patch16_224", "model_load"),
    ("loading weights file model.safetensors from cache at /root/.cache/hub", "model_load"),
    # the training loop
    ("***** Running training *****", "train_loop"),
    ("begin training epoch 1", "train_loop"),
    ("iter 100: loss 2.3405, time 52.31ms, mfu 31.20%", "train_loop"),
    ("Step 100 | loss: 2.31 | lr: 3e-4", "train_loop"),
    # evaluation, checkpoints, builds, data, resources, shutdown
    ("Start inference on 500 batches", "evaluation"),
    ("Compiling module primitive_computation_convert_element_type.3", "build"),
    ("[>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>] 458/458, 0.5 task/s, elapsed: 962s, ETA:     0s",
     "evaluation"),
    ("***** Running Evaluation *****", "evaluation"),
    ("Saving model checkpoint to output/checkpoint-500", "checkpoint_save"),
    ("Emitting ninja build file /root/.cache/torch_extensions/py310_cu118/fused_adam/"
     "build.ninja...", "build"),
    ("Map (num_proc=8):  45%|####5     | 4500/10000 [00:10<00:12, 450 examples/s]",
     "data_load"),
    ("srun: job 12345 queued and waiting for resources", "resource_wait"),
    ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", "resource_wait"),
    ("Destroying process group", "shutdown"),
    # torchtitan, Megatron-LM, OpenRLHF: the loop begins; a real step counter still counts
    ("[rank0]:[titan] 2025-03-01 10:00:00,000 - root - INFO - Training starts at step 1.",
     "train_loop"),
    ("[before the start of training step] datetime: 2024-04-04 09:09:27", "train_loop"),
    ("Episode [1/10]:  30%|###       | 3/10 [01:02<02:25, 20.70s/it]", "train_loop"),
    ("Step 12/100: loss=2.3140 lr=3.0e-04", "train_loop"),
    ("Step 12/100: train acc 0.91", "train_loop"),
    # OpenRLHF's evaluations
    ("Starting async evaluation...", "evaluation"),
    ("\u23f0 Evaluation start time: 2025-03-01 10:00:00", "evaluation"),
    ("Eval stage of steps 200:  40%|####      | 4/10 [00:04<00:06,  1.01s/it]", "evaluation"),
    # torchtitan's mesh, TensorFlow's workers and TPU
    ("Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1, "
     "ep=1", "distributed_init"),
    ("INFO:tensorflow:Initializing the TPU system: grpc://10.0.0.2:8470", "distributed_init"),
    # Slurm's busy nodes, SkyPilot's runtime set-up
    ("srun: Job 205912 step creation temporarily disabled, retrying (Requested nodes are busy)",
     "resource_wait"),
    ("srun: Job 205912 step creation still disabled, retrying (Requested nodes are busy)",
     "resource_wait"),
    ("Preparing SkyPilot runtime (2/3 - dependencies)  View logs: sky logs --provision "
     "my-cluster", "resource_wait"),
    # SGLang's DeepGEMM kernels, Megatron's dataset index, torchtitan's last barrier
    ("Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 "
     "mins) if you have not run `sglang.compile_deep_gemm`.", "build"),
    ("DeepGEMM JIT Compiling for <gemm_fp8_fp8_bf16_nt> M=128, N=7168, K=2048. Please wait.",
     "build"),
    ("\tBuild and save the document index to 3c1f2a-GPTDataset-train-document_index.npy",
     "data_load"),
    ("[rank0]:Sleeping 2 seconds for other ranks to complete", "shutdown"),
    ("srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", "shutdown"),
    ("wandb: Run summary:", "shutdown"),
    ("INFO:fairseq_cli.train:done training in 117.2 seconds", "shutdown"),
    # torchvision's dataset downloads, torch.hub's weights, detectron2's proposals and
    # evaluators, ultralytics' label scan, mmengine's loop start and checkpoint loader
    ("Downloading https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz to "
     "./data/MNIST/raw/train-images-idx3-ubyte.gz", "data_load"),
    ("Extracting ./data/cifar-10-python.tar.gz to ./data", "data_load"),
    ('Downloading: "https://download.pytorch.org/models/resnet50-0676ba61.pth" to '
     "/root/.cache/torch/hub/checkpoints/resnet50-0676ba61.pth", "model_load"),
    ("[d2.data.build]: Loading proposals from: datasets/coco/proposals.pkl", "data_load"),
    ("[d2.evaluation.coco_evaluation]: Preparing results for COCO format ...", "evaluation"),
    ("Preparing results in the LVIS format ...", "evaluation"),
    ("train: Scanning /data/coco128/labels/train2017... 126 images, 2 backgrounds, 0 corrupt: "
     "100%|##########| 128/128 [00:00<00:00, 1.2kit/s]", "data_load"),
    ("mmengine - INFO - Checkpoints will be saved to /work/dirs/exp.", "train_loop"),
    ("Loads checkpoint by local backend from path: work_dirs/epoch_1.pth", "model_load"),
    ("Initializing mmdet backbone weights...", "model_load"),
    # Lightning's test and predict bars, Paddle hapi's prediction
    ("Testing DataLoader 0:  50%|#####     | 5/10 [00:01<00:01,  4.20it/s]", "evaluation"),
    ("Predicting DataLoader 0:  50%|#####     | 5/10 [00:01<00:01,  4.20it/s]", "evaluation"),
    ("Predict begin...", "evaluation"),
    ('  File "train.py", line 40, in validation_step', "evaluation"),
    # NeMo's checkpoint callback and Megatron checkpoint IO, its NGC downloads
    ("[NeMo I 2024-06-01 10:00:00 nemo_model_checkpoint:573] Checkpoint save for step 100 started "
     "at 1717236000.123.", "checkpoint_save"),
    ("[NeMo I 2024-06-01 10:00:00 pl:353] Using <megatron.core.dist_checkpointing.strategies."
     "fully_parallel.FullyParallelSaveStrategyWrapper object at 0x7f1c> dist-ckpt save strategy.",
     "checkpoint_save"),
    ("[NeMo I 2024-06-01 10:00:00 pl:275] Using <megatron.core.dist_checkpointing.strategies."
     "fully_parallel.FullyParallelLoadStrategyWrapper object at 0x7f1c> dist-ckpt load strategy.",
     "model_load"),
    ("[NeMo I 2024-06-01 10:00:00 cloud:68] Downloading from: https://api.ngc.nvidia.com/v2/models/"
     "nvidia/nemo/stt_en_conformer/versions/1.0/files/stt_en_conformer.nemo to /root/.cache/torch/"
     "NeMo/stt_en_conformer.nemo", "model_load"),
    # rounds 22 to 30: TensorFlow's input pipeline and TPU, Ultralytics, Unsloth, TGI, Triton,
    # pip, torch_xla, Habana's HCCL, llama.cpp, nnU-Net
    ("2019-02-19 16:30:40.833944: I tensorflow/core/kernels/shuffle_dataset_op.cc:110] Filling up "
     "shuffle buffer (this may take a while): 159 of 10000", "data_load"),
    ("Transferred 319/355 items from pretrained weights", "model_load"),
    ("==((====))==  Unsloth 2025.3.19: Fast Qwen2 patching. Transformers: 4.49.0.", "model_load"),
    ("2024-05-01T01:17:02.618817Z  INFO shard-manager: text_generation_launcher: Waiting for shard "
     "to be ready... rank=1", "model_load"),
    ("2023-11-29T05:27:54.565434Z  INFO shard-manager: text_generation_launcher: Starting shard "
     "rank=0", "model_load"),
    ("I0316 09:35:23.371546 4226 model_lifecycle.cc:461] loading: tensorrt_llm:1", "model_load"),
    ("  Building wheel for flash-attn (setup.py) ... -", "build"),
    ("2022-03-18 00:11:38.243683: I torch_xla/csrc/tensor.cpp:1298] Executing IR graph hash "
     "42db8cd56fa30daaf09b68145bb49d4e on device TPU:0 ...", "train_loop"),
    ("INFO:tensorflow:Init TPU system", "distributed_init"),
    ("[14:28:30.292683][HCCL           ][debug][tid:10C22] hccl::hccl_context::init_device "
     "calling hccl_init_device with deviceId 0", "distributed_init"),
    ("Feb 07 09:45:32 ollama[2202418]: llm_load_print_meta: n_ff_exp             = 2048",
     "model_load"),
    ("using pin_memory on device 0", "data_load"),
]
# A server's requests: the engine's stats with requests in it, an inference call's access-log
# line, a request taken in (vLLM, uvicorn, ollama's gin, Triton, llama.cpp's server)
NAMED += [
    ("INFO 04-28 22:54:32 [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
     "generation throughput: 5.4 tokens/s, Running: 1 reqs, Waiting: 14 reqs, GPU KV cache "
     "usage: 76.5%, Prefix cache hit rate: 92.0%", "serving"),
    ("INFO 08-27 13:53:14 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation "
     "throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 11 reqs, GPU KV "
     "cache usage: 3.3%", "serving"),
    ('[GIN] 2024/07/24 - 14:10:32 | 200 |  1.63s |       127.0.0.1 | POST     "/api/chat"',
     "serving"),
    ("I0829 15:51:52.072599 1 http_server.cc:3372] HTTP request: 2 /v2/models/diarize/versions/1/"
     "infer", "serving"),
    ("INFO 02-12 15:20:24 logger.py:37] Received request chatcmpl-5d9f00ee: prompt: '<|im_start|>"
     "system', params: SamplingParams(n=1)", "serving"),
    ("slot launch_slot_: id  0 | task 12 | processing task", "serving"),
]
# Rounds 31 to 34: a loop that says where it begins or how long it runs, a sharded model's
# download, a server's health probe answered 503 while it loads, a wait until workers are up
NAMED += [
    ("11:07:08    INFO Starting from step 0 (total_tokens=0, total_samples=0)", "train_loop"),
    ("Training 100 epochs on random image sections with batch size 15.", "train_loop"),
    ("Downloading shards:   0%|          | 0/4 [00:00<?, ?it/s]", "model_load"),
    ("srv  log_server_r: request: GET /health 127.0.0.1 503", "model_load"),
    ('INFO:     127.0.0.1:50412 - "GET /health HTTP/1.1" 503 Service Unavailable', "model_load"),
    ("2021-04-08 07:15:10,182 INFO main.py:849 -- Waiting until actors are ready (30 seconds "
     "passed).", "resource_wait"),
]
# Rounds 35 and 36: TensorRT-LLM's MPI set-up and a rank's device, Triton's shutdown, a
# parameter-server cluster's sessions closing, PaddleDetection's test iterations, mmcv's test
# bar as it starts
NAMED += [
    ("[TensorRT-LLM][INFO] MPI size: 4, MPI local size: 4, rank: 1", "distributed_init"),
    ("[TensorRT-LLM][INFO] Rank 2 is using GPU 2", "distributed_init"),
    ("I0131 00:44:47.201645 760 server.cc:307] Waiting for in-flight requests to complete.",
     "shutdown"),
    ("[ps 0] D Session closed.", "shutdown"),
    ("[worker 1] D Server stopped.", "shutdown"),
    ("[INFO 2021-05-03 13:19:51,682 eval_utils.py:189] Test iter 0", "evaluation"),
    ("[                                                  ] 0/5000, elapsed: 0s, ETA:",
     "evaluation"),
]
# Round 38: a job's resources deleted, a container image fetched
NAMED += [
    ("I0201 23:07:22.973736       1 replicas.go:239] Deleting Jobs namespace=ml selector=kubeflow."
     "org=,job_type=MASTER", "shutdown"),
    ("pyxis: importing docker image ...", "resource_wait"),
    ('Normal  Pulling    12s   kubelet  Pulling image "nvcr.io/nvidia/pytorch:24.01-py3"',
     "resource_wait"),
]
# Round 39: a model pushed to the Hub, a validation case predicted
NAMED += [
    ("Pushing model files to the Hub ...", "checkpoint_save"),
    ("2023-09-22 08:54:03.359331: predicting CTA-02_0000", "evaluation"),
]
# Rounds 43 to 46: TF's connect_to_cluster, torch's DataLoader starting its workers, a request
# no node can hold, a job submitted and not yet started
NAMED += [
    ("I0518 15:49:45.564608 140338081622016 remote.py:225] default session config: device_count {",
     "distributed_init"),
    ("/usr/local/lib/python3.7/dist-packages/torch/utils/data/dataloader.py:481: UserWarning: This "
     "DataLoader will create 30 worker processes in total. Our suggested max number of worker in "
     "current system is 2", "data_load"),
    ("Infeasible task. No nodes satisfy hard constraints for task = 94a4306a4e54cd71115be891",
     "resource_wait"),
    ("Job 'raysubmit_CYMCKqneLvanNwkT' submitted successfully", "resource_wait"),
    ("Submitted batch job 4242", "resource_wait"),
]
# Rounds 52, 53, 55: transformers' Trainer header, requests and servers, coqui's model, Neuron's
# compiler, oneCCL's transport
NAMED += [
    ("  Total train batch size (w. parallel, distributed & accumulation) = 4", "train_loop"),
    ("  Total optimization steps = 3000", "train_loop"),
    ("2024-10-22 10:23:36,828 INFO get instruct inference request", "serving"),
    ("2024-12-04T14:36:13+08:00 - vox_box.server.server - INFO - Serving on 0.0.0.0:40745.",
     "serving"),
    ("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)", "serving"),
    (" > Using model: hifigan", "model_load"),
    ("2023-09-08T21:17:31Z USER 238334 [sg0000/Tensorizer/SundaSizeTiling]: Running "
     "SundaSizeTiling", "build"),
    ("2023:06:23-03:36:46:(3742406) |CCL_WARN| did not find MPI-launcher specific variables, "
     "switch to ATL/OFI, to force enable ATL/MPI set CCL_ATL_TRANSPORT=mpi", "distributed_init"),
]
# Rounds 60 and 62: a model's load progress (ollama, llama.cpp's loader, the Hub's files), MPI
# processes spawned
NAMED += [
    ('time=2025-05-01T14:09:37.086+02:00 level=DEBUG source=server.go:625 msg="model load '
     'progress 0.00"', "model_load"),
    ("load_all_data: buffer type CUDA_Host is not the default buffer type for device CUDA0 for "
     "async uploads", "model_load"),
    ("Fetching 5 files:   0%|          | 0/5 [01:45<?, ?it/s]", "model_load"),
    ("rank 0 using MpiPoolSession to spawn MPI processes", "distributed_init"),
]
# Round 54: parts of a job not yet up, dmlc's tracker
NAMED += [
    ("[2025-01-16 21:25:09,429][21824] Components not started: Batcher_0, LearnerWorker_p0, "
     "wait_time=180.0 seconds", "resource_wait"),
    ("Tracker started, with env={DMLC_NUM_SERVER=0, DMLC_TRACKER_URI=10.0.0.52, "
     "DMLC_TRACKER_PORT=9091, DMLC_NUM_WORKER=33}", "distributed_init"),
]
# Rounds 48 to 50: TurboMind's engine step, ps-lite's nodes joining
NAMED += [
    ("[TM][INFO] ------------------------- step = 2500 -------------------------", "serving"),
    ("src/van.cc:357: Bind to role=worker, ip=10.5.37.73, port=43871, is_recovery=0",
     "distributed_init"),
    ("[14:01:04] src/van.cc:446: ? => 1. Meta: request=0, timestamp=0, control={ cmd=ADD_NODE, "
     "node={ role=worker, ip=10.5.37.73, port=43871, is_recovery=0 } }. THIS IS NOT DATA MSG!",
     "distributed_init"),
]
# Rounds 64 to 70: Open MPI's daemons, a cluster launched, a job pending, a pod's events, a
# worker queued, Triton's backend and TensorRT-LLM's KV cache, a model printed or made by a
# function, espnet2's epoch, reinforcement learning's counters, ollama's OpenAI routes, mpirun's
# abort, Triton's shutdown countdown
NAMED += [
    ("[clx-hercules-096:24964] [[50860,0],46] orted: up and running - waiting for commands!",
     "distributed_init"),
    ("Daemon [[50860,0],6] checking in as pid 4077 on host clx-hercules-008", "distributed_init"),
    ("[hyperion:05201] mca: base: components_open: opening plm components", "distributed_init"),
    ("Launching a new cluster 'sky-236f-romilb'. Proceed? [Y/n]: Y", "resource_wait"),
    ("I 09-10 07:21:00 utils.py:270] Job status: JobStatus.PENDING", "resource_wait"),
    ("  Normal  Scheduled  82s   default-scheduler  Successfully assigned kuberay/raycluster-"
     "worker-r7rsn to node0", "resource_wait"),
    (" 2020-10-19 09:46:56,761   [Trainer-1] still in queue: 24", "resource_wait"),
    ("I0118 14:09:47.387333 18 python.cc:1875] TRITONBACKEND_ModelInstanceInitialize: "
     "identity_fp32_0_0 (CPU device 0)", "model_load"),
    ("[TensorRT-LLM][INFO] [MemUsageChange] Allocated 9.71 GiB for max tokens in paged KV cache "
     "(63616).", "model_load"),
    ("[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 994", "model_load"),
    ("  (0): Linear(in_features=238, out_features=512, bias=True)", "model_load"),
    ("    (relu): ReLU(inplace=True)", "model_load"),
    ("2022-04-10,23:37:38.929 - {main_fedavg.py (180)} - create_model(): done", "model_load"),
    ("[f3d8bac11bcb] 2022-08-08 08:47:09,516 (trainer:275) INFO: 1/50epoch started",
     "train_loop"),
    ("Collected 980 episodes 21895 timesteps so far this iter", "train_loop"),
    ("|    total_timesteps | 2048     |", "train_loop"),
    ('[GIN] 2024/07/24 - 14:31:02 | 500 |         5m14s |       127.0.0.1 | POST     '
     '"/v1/chat/completions"', "serving"),
    ("Primary job  terminated normally, but 1 process returned", "shutdown"),
    ("a non-zero exit code.. Per user-direction, the job has been aborted.", "shutdown"),
    ("I0131 00:44:48.201804 760 server.cc:323] Timeout 29: Found 0 model versions that have "
     "in-flight inferences", "shutdown"),
    ("Graph compilation:  84%|########4 | 84/100 [1:09:59<20:26]", "build"),
]
NOT_THERE = [
    ("Pulled the latest model from the hub", "checkpoint_save"),
    # rounds 64 to 70: a question about evaluation, a job that ran, a KV cache line of an
    # engine whose graph capture comes next, a model's name, a cluster's state, a daemon's name
    ("The next step is epoch 2/5 step 3/12 (global step 15). Should checkpoint? True. Should "
     "save? True. Should run evaluation? False.", "evaluation"),
    ("I 09-10 07:25:00 utils.py:270] Job status: JobStatus.RUNNING", "resource_wait"),
    ("(EngineCore_DP0 pid=38) INFO 01-14 01:49:37 [kv_cache_utils.py:1291] GPU KV cache size: "
     "521,088 tokens", "model_load"),
    ("model_name = create_model_v2", "model_load"),
    ("Launched cluster 'sky-236f' in 3m", "resource_wait"),
    ("orted_cmd: received tree_spawn", "distributed_init"),
    ("Linear(in_features=238, out_features=512, bias=True) was frozen", "model_load"),
    ("predicting the next token with a cache of 4096", "evaluation"),
    ("deleting old checkpoints to keep the last 3", "shutdown"),
    ("Loaded image 17 of 5000", "resource_wait"),
    # a session or server closed mid-sentence, a training iteration
    ("Server stopped responding, retrying in 5s", "shutdown"),
    ("Session closed by peer; reconnecting to the parameter server", "shutdown"),
    ("train iter 100: loss 2.3", "evaluation"),
    # a health probe answered, a step that is no start, a model's 503 in a test's name
    ('INFO:     127.0.0.1:50412 - "GET /health HTTP/1.1" 200 OK', "model_load"),
    ("retrying the request after HTTP 503 from the upstream", "model_load"),
    ("Step 0 took 3.2s", "train_loop"),
    # an idle engine's stats, a probe, a client's own call: no request in the server
    ("Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, "
     "Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%", "serving"),
    ('INFO:     127.0.0.1:38440 - "GET /health HTTP/1.1" 200 OK', "serving"),
    ('INFO:     127.0.0.1:38440 - "GET /v1/models HTTP/1.1" 200 OK', "serving"),
    # Megatron's model-parallel groups are process groups, not a model being built
    ("> initializing model parallel with size 2", "model_load"),
    ("Distributed environment: NO", "distributed_init"),  # accelerate on one process
    ("step 10 | eval_loss: 2.31", "train_loop"),  # an evaluation's loss
    # a launcher's or provisioning script's own progress, not a training step
    ("Step 12/12: Running health checks", "train_loop"),
    ("Step 3/7: Provisioning instances", "train_loop"),
    ("Step 2/5: Installing...", "train_loop"),
    ("Training completed", "train_loop"),
    ("Evaluation completed in 0:01:02, global_step 10", "evaluation"),
    ("Built device mesh in 0.21 seconds", "distributed_init"),
    ("INFO:tensorflow:Finished initializing TPU system.", "distributed_init"),
    ("srun: Step created for job 205912", "resource_wait"),
    ("Loaded JIT-compiled kernels from the cache", "build"),
    ("Document index size: 1000000", "data_load"),
    ("Waiting for other ranks to reach the barrier", "shutdown"),
    ("wandb: Run data is saved locally in /w/wandb/run-20240101", "shutdown"),
    ("srun: error: Unable to create step for job 1234: Job/step already completing or "
     "completed", "shutdown"),
    # Lightning's start-of-fit warning names the hook in backticks: no evaluation runs
    ("You passed in a `val_dataloader` but have no `validation_step`. Skipping val loop.",
     "evaluation"),
    ("You defined a `validation_step` but have no `val_dataloader`. Skipping val loop.",
     "evaluation"),
    # a download bar of bytes, a feature extraction: no dataset fetched, no model downloaded
    ("Downloading: 100%|##########| 1.20G/1.20G [00:30<00:00, 40.0MB/s]", "model_load"),
    ("Extracting features from the model", "data_load"),
    # mmengine's LoggerHook says where logs go: no loop started
    ("Text logs will be saved to work_dirs/exp after the training process.", "train_loop"),
]
# Signals, as the launcher prints them, and lines that only look like one.
SIGNALED = [
    ("slurmstepd: error: *** STEP 1234.0 ON node01 CANCELLED AT 2024-05-01T10:00:00 DUE TO "
     "TIME LIMIT ***", "timeout"),
    ("slurmstepd: error: *** JOB 1234 ON node01 CANCELLED AT 2024-05-01T10:00:00 DUE TO NODE "
     "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", "missing_peer"),
    ("PRTE has lost communication with a remote daemon.", "missing_peer"),
    ("ORTE has lost communication with a remote daemon.", "missing_peer"),
    ("I tensorflow/core/distributed_runtime/master.cc:221] CreateSession still waiting for "
     "response from worker: /job:worker/replica:0/task:3", "missing_peer"),
    ("At least one pair of MPI processes are unable to reach each other for", "missing_peer"),
    ("An MPI communication peer process has unexpectedly disconnected.  This", "missing_peer"),
    ("WARNING: Open MPI failed to TCP connect to a peer MPI process.  This", "connection_error"),
    ("WARNING: Open MPI failed to handshake with a connecting peer MPI", "connection_error"),
    ("[rank0]:[E103 21:38:08.812846781 ProcessGroupNCCL.cpp:2241] [PG ID 0 PG GUID 0(default_pg) "
     "Rank 0]  failure detected by watchdog at work sequence id: 16172", "watchdog"),
    ("Very slow compile?  If you want to file a bug, run with envvar "
     "XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.", "stall_warning"),
    # Ascend's CANN and HCCL, Paddle's store and launcher
    ("EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote "
     "Rank did not send the data in time. Please check the reason for the rank being stuck",
     "timeout"),
    ("EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote "
     "Rank did not send the data in time. Please check the reason for the rank being stuck",
     "missing_peer"),
    ("I1127 21:34:05.015228 3935673 tcp_utils.cc:107] Retry to connect to 0.1.68.146:63314 while "
     "the server is not yet listening.", "connection_error"),
    ("not ready endpoints:['0.1.68.146:38149', '0.1.68.146:35087']", "connection_error"),
    # rounds 43 to 46: a wait said long, a worker or actor gone (killed: out of memory, mostly)
    ("          and is still waiting for the result to materialize, 270s elapsed...",
     "stall_warning"),
    ("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR",
     "missing_peer"),
    ("2020-11-23 11:34:40,000\tWARNING main.py:480 -- A Ray actor died during training. Trying to "
     "restart and continue training from last checkpoint.", "missing_peer"),
    ("DataLoader worker 3 was killed by signal: Killed.", "oom"),
    # round 54: a connection's failure said after it
    ("[LightGBM] [Warning] Connecting to rank 7 failed, waiting for 22383 milliseconds",
     "connection_error"),
    # round 55: a gRPC channel that never connected
    ("RuntimeError: tensorflow/compiler/xla/xla_client/mesh_service.cc:172 : Check failed: "
     "impl_->channel->WaitForConnected( std::chrono::system_clock::now())", "connection_error"),
    # rounds 48: no answer for a while; a timeout after a time
    ("2025-09-24 05:48:14] Health check failed. Server couldn't get a response from detokenizer "
     "for last 20 seconds. tic start time: 05:47:54.", "stall_warning"),
    ("I0331 02:49:30.617945 803444 transfer_engine_py.cpp:454] Sync batch data transfer timeout "
     "after 33061142969ns", "timeout"),
]
NOT_SIGNALED = [
    ("#SBATCH --time=02:00:00  # time limit of the job", "timeout"),
    ("sometimes out of sync, retrying", "timeout"),
    ("PRTE daemon on node02 reported in", "missing_peer"),
    ("Received response from worker: /job:worker/replica:0/task:3", "missing_peer"),
    ("btl_tcp: peer 10.0.0.2 reconnected after 2 retries", "missing_peer"),
    ("WARNING: Open MPI failed to load the openib BTL", "connection_error"),
    ("got a response for 20 seconds of audio", "stall_warning"),
    ("timeout afterwards is set by --timeout", "timeout"),
    ("Connected to rank 7; 3 failed attempts before", "connection_error"),
    ("Started the components not needed for inference", "resource_wait"),
    ("  Num examples = 4000", "train_loop"),  # evaluation prints it too
    ("the inference request body is logged at debug level", "serving"),
    ("Using model: gpt-4o for the judge", "model_load"),  # not at a line's head after `>`
    ("Fetching the files list from the bucket", "model_load"),
    ("spawned a process to watch the MPI job", "distributed_init"),
    # rounds 43 to 46
    ("Resubmitted the batch of 4 jobs after the restart", "resource_wait"),
    ("the feasible region is infeasible for this solver", "resource_wait"),
    ("still waiting for the dataset to download", "stall_warning"),  # no time said
    ("2020-04-13 15:35:00,032 WARNING worker.py:1072 -- A worker died or was killed while "
     "executing task ffffffffffffffff45b95b1c0100.", "oom"),  # neither said
    ("the actor restarted after it died in the previous run", "oom"),
    ("step = 2500, loss 0.31", "serving"),  # a trainer's step, not TurboMind's
    ("Binding to role model: the actor", "distributed_init"),
]


@functools.cache
def generic() -> RuleSet:
    return RuleSet([p for p in load_builtin_packs() if p.name == "generic"])


def named(line: str) -> set[str]:
    """The generic ids a line is named by: the phases it STARTs and the signals it raises."""
    found = generic().match(line)
    return {r.id for r in (*found.phase_starts, *found.signals)} if found is not None else set()


@pytest.mark.parametrize(("line", "rule"), NAMED + SIGNALED)
def test_the_generic_layer_names_the_place_or_signal_frameworks_print(line: str, rule: str):
    assert f"generic:{rule}" in named(line)


@pytest.mark.parametrize(("line", "rule"), NOT_THERE + NOT_SIGNALED)
def test_lines_that_only_look_like_a_place_or_a_signal_are_not_named_so(line: str, rule: str):
    assert f"generic:{rule}" not in named(line)


@pytest.mark.parametrize("prefiltered", [False, True])
def test_a_wait_for_a_place_is_that_place_and_a_wait_alone_is_a_wait(prefiltered: bool):
    from hangwatch.core.clock import FakeClock
    from hangwatch.core.engine import Engine
    from hangwatch.core.prefilter import build_prefilter

    def opened(line: str) -> str | None:
        rules = generic()
        e = Engine(rules, default_stall=600.0, clock=FakeClock(),
                   prefilter=build_prefilter(rules) if prefiltered else None)
        e.feed_block("log", line.encode() + b"\n")
        return e.state()["phase"]

    # text-generation-inference's launcher: the wait is for the model shard's load
    assert named("INFO text_generation_launcher: Waiting for shard 0 to be ready...") == {
        "generic:model_load"}
    assert opened("INFO text_generation_launcher: Waiting for shard 0 to be ready...") == \
        "generic:model_load"
    assert opened("Waiting for 3 workers to join") == "generic:resource_wait"


def test_every_built_in_pattern_fits_hyperscan_in_both_forms():
    # A phase's alternatives are one pattern; past Hyperscan's length limit (16000 bytes,
    # a caseless letter counting several times in the loose form) it is compiled as its
    # alternatives (core/databases.py). One Hyperscan still refuses would send the prefilter
    # to trying each pattern alone and matching that one on every line: once it made the
    # engine fifteen times slower with every test still passing.
    pytest.importorskip("hyperscan")
    for form in ("strict", "loose"):
        patterns = {f"{rule_id} {kind}": getattr(line_forms(pattern), form)
                    for kind, rule_id, pattern in load_rule_set().patterns()}
        if compile_database(list(patterns.values())) is None:
            refused = [i for i, p in patterns.items() if compile_database([p]) is None]
            pytest.fail(f"Hyperscan refuses the {form} form of {refused}")
