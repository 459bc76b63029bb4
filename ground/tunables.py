"""Every tunable number of kith, named, in one place.

Defaults follow the design seeds (``../shared/seeds``) where they name a figure; the
settings in :mod:`ground.config` take their defaults from here, so a reader who wants to
know "why 0.85?" finds every threshold, budget, limit and hour side by side.
"""

from __future__ import annotations

# --- LLM -------------------------------------------------------------------------
LLM_TIMEOUT_S = 60.0
LLM_MAX_RETRIES = 2
# A voice note's transcription ([media]): a minute of audio takes a hosted Whisper a few seconds, a local one more.
TRANSCRIPTION_TIMEOUT_S = 120.0
VOICE_MAX_BYTES = 20 * 1024 * 1024  # Telegram's own getFile limit; a longer note is told so
VOICE_MAX_SECONDS = 600.0
IMAGE_MAX_BYTES = 10 * 1024 * 1024  # a photo shown to a model that sees ([media] image_max_bytes)
IMAGES_PER_TURN = 4  # the most images of one message shown to the model
DOCUMENT_MAX_BYTES = 10 * 1024 * 1024  # a document kept for a person ([media] document_max_bytes)
DOCUMENT_MAX_PAGES = 300  # a PDF's pages read at most ([media] document_max_pages)
DOCUMENT_MAX_CHARS = 1_000_000  # a document's text kept at most ([media] document_max_chars)
# A document's passages: about a paragraph or three each, small enough that one matching sentence is not drowned
# by the rest, large enough to keep a recipe's ingredients with its name.
DOCUMENT_CHUNK_CHARS = 900
DOCUMENT_CHUNK_OVERLAP_CHARS = 150  # the end of one passage begins the next: a sentence cut between them is whole once
DOCUMENTS_MAX_PER_PERSON = 200  # documents one person may keep; past it, an honest line asks them to /docs forget one
DOCUMENT_PASSAGES_PER_TURN = 3  # the most passages of documents a prompt shows
DOCUMENT_PASSAGE_MIN_RELEVANCE = 0.25  # a passage weaker than this never reaches a prompt (recall's blend, 0..1)
# Passages embedded in one embedder call after a document is kept: small, so a reply's query embedding waits for
# one batch (about 0.7 s with the default encoder on one thread), never for the whole document.
DOCUMENT_EMBED_BATCH = 8
LLM_MAX_REPLY_TOKENS = 1024
MODEL_PROCESS_START_TIMEOUT_S = 120.0  # the model process loading litellm (seconds on a slow disk)
MODEL_PROCESS_STOP_TIMEOUT_S = 5.0  # then it is killed
MODEL_PROCESS_HUNG_MARGIN_S = 2.0  # the child bounds a call by its timeout + 1 s; past + 2 s it is hung
MODEL_PROCESS_QUERY_TIMEOUT_S = 10.0  # a question the model process answers from litellm's tables (no network)
MODEL_PROCESS_LINE_LIMIT = 64 * 1024 * 1024  # bytes per request or answer on its pipe; prompts are far smaller
# A streamed reply's text crosses the pipe at most this often (the first words at once): a preview shows it no
# faster, and a line per token would cost the model process a write per token.
MODEL_PROCESS_DELTA_INTERVAL_S = 0.05
# A reply previewed as it grows (conversation.reply_preview): at most one update per STREAM_GAP_S after the first
# words, and a platform's wait longer than STREAM_GIVE_UP_S ends the preview (the reply is sent whole, when allowed).
STREAM_GAP_S = 1.0
STREAM_GIVE_UP_S = 5.0
# The first preview waits this long after the first words (inside the 300 ms a person notices): a reply finished
# by then is sent whole, with no preview request at all.
STREAM_FIRST_DELAY_S = 0.2
# The reply is ready: a preview write under way gets this long to finish (and be noted) before it is cut off.
PREVIEW_WRITE_GRACE_S = 5.0
MODEL_PROCESS_RESTART_BACKOFF_S = 10.0  # after a failed start, calls fail at once this long before the next try
MODEL_PROCESS_START_ATTEMPTS = 3  # children in a row that die before they are ready make a failed start
MODEL_PROCESS_RESPAWN_PAUSE_S = 0.5  # between those attempts, so one that dies at once is not respawned in a loop
# A call whose model process died under it is sent to the next one at most this often: a child that keeps dying
# under the same call is broken (the call may be what kills it), not unlucky.
MODEL_PROCESS_CALL_RESENDS = 2

# --- Conversation history and the bounded prompt ---------------------------------
HISTORY_WINDOW_MESSAGES = 40  # recent window every turn sees
HISTORY_WINDOW_CACHE_THREADS = 500  # threads whose recent window is kept in memory between turns
HISTORY_WINDOW_CACHE_CHARS = 4_000_000  # ... and at most this much of their message text in all
SUMMARY_TRIGGER_MESSAGES = 20  # summarize once this many messages fell out of the window
SUMMARY_BATCH_MESSAGES = 200  # at most this many messages folded per summarizer run

# Character budgets of each prompt part; their sum bounds the prompt whatever the thread's age.
BUDGET_PERSONA_CHARS = 4_000
BUDGET_PINNED_CHARS = 1_600
BUDGET_RECALL_CHARS = 1_600  # the recalled memories' share of the prompt
BUDGET_GOALS_CHARS = 800
BUDGET_DOCUMENTS_CHARS = 2_400  # passages of the person's documents
BUDGET_SUMMARY_CHARS = 2_000
BUDGET_RECENT_CHARS = 12_000
DISPLAY_NAME_MAX_CHARS = 64  # a display name longer than this is cut wherever it enters a prompt or a terminal
BUDGET_MESSAGE_CHARS = 8_000  # the new message itself
BUDGET_MESSAGE_ITEM_CHARS = 2_000  # any one older message inside the recent window

# --- Memory: capture and validation ---------------------------------------------
CAPTURE_TIMEOUT_S = 60.0
MAX_MEMORIES_PER_RUN = 30
MAX_MEMORY_CHARS = 2_000
MAX_EVIDENCE_CHARS = 2_000
# Relations (and alias pairs) read with one proposed memory (memory.capture.relation_rules): a sentence rarely
# names more, and a long list is a model padding its answer.
MAX_RELATIONS_PER_MEMORY = 4
# A memory's word is grounded in a quote's word when they share a 4-letter stem (PREFIX_MATCH_MIN_CHARS)
# and neither ending is longer than this: "wohnt"/"wohne", "Kraków"/"Krakowie".
GROUNDING_MAX_ENDING_CHARS = 4

# --- Memory: similarity, merge and conflict --------------------------------------
MERGE_THRESHOLD = 0.85
CONFLICT_THRESHOLD = 0.55
SINGLE_WORD_LINK_SCORE = 0.6  # one shared distinctive word links two short facts
SHORT_FACT_MAX_WORDS = 3  # "short" for the single-word link
PREFIX_MATCH_MIN_CHARS = 4
CONFLICT_MIN_WORDS = 3
CONFLICT_MIN_AGREEMENTS = 2
CONFLICT_MIN_JACCARD = 0.5
GATE_CANDIDATES = 20  # nearest stored memories the gate compares a new fact against
# Dedupe by meaning (memory/core/similarity.py): a trusted embedder cosine above this calls two facts that do
# not disagree (another name, number, or one swapped word) one fact. Chosen by `python -m bench.dedupe_threshold`:
# 114 labelled pairs of our own (rewordings, same topic another fact, unrelated; en/pl/de/es/fr), the default
# embedder, 5-fold cross-validation maximising F0.5 (a wrong merge loses a fact): every fold chose 0.74; held
# out, precision 0.87 and recall 0.65 (the cosine alone at 0.74: precision 0.59).
MEANING_MERGE_THRESHOLD = 0.74
SUBSTITUTION_MIN_SHARED = 2  # content words two facts share before one swapped word makes them another fact
NUMBER_WORDS_UP_TO = 100  # number words read as their value ("two daughters" is "2 daughters")

# --- Memory: recall and the prompt's memory parts -------------------------------
PINNED_MAX = 12
RECALL_MAX_ITEMS = 6
RECALL_ITEM_CHARS = 320
# The blend, recency, neighbours and date boost below were chosen by leave-one-conversation-out on LoCoMo
# (bench/locomo_recall.py): each value is the one chosen for every held-out conversation.
RECALL_VECTOR_WEIGHT = 0.8  # relevance blends 80 % vector similarity,
RECALL_BM25_WEIGHT = 0.2  # 20 % BM25
RECALL_HALF_LIFE_DAYS = 0.0  # recency off: it did not help under leave-one-out (a positive value turns it on)
RECALL_NEIGHBOUR_SHARE = 1.0  # a memory said near a strong match gets this share of that match's score ...
RECALL_NEIGHBOUR_WIDTH = 3  # ... being one of the three before or after it in the same chat ...
RECALL_NEIGHBOUR_GAP_MINUTES = 60.0  # ... each said at most this long after the one before (a pause ends it)
RECALL_DATE_BOOST = 1.25  # a memory said inside a time the query names ("last week", "in May")
# The person's graph in recall (memory.recall.graph_reach): a memory whose relation touches a being the query
# names, or one a relation of the best candidates touches, gets this share of the best score among the other
# memories about that being ... Every leave-one-out fold on LoCoMo chose share 0.5, one hop, names only (with
# LoCoMo's observations standing in for captured relations; docs/benchmarks.md).
RECALL_GRAPH_SHARE = 0.5
RECALL_GRAPH_HOPS = 1  # ... the beings selected and (2) those one relation away from them ...
RECALL_GRAPH_FROM_BEST = 0  # ... the beings of this many best candidates' relations (0: only the names said)
RECALL_GRAPH_RELATIONS = 4  # relations that brought memories in, shown with them in the prompt
# A being with more relations than this reaches everything (as the person does): it lifts the candidates that
# touch it but fetches nothing and is not expanded. Keeps a recall's graph work small at any graph size.
RECALL_GRAPH_HUB = 48
RECALL_IMPORTANCE_WEIGHT = 0.3
RECALL_USE_CREDIT = 0.05  # per citation, capped below
RECALL_USE_CREDIT_CAP = 0.2
RECALL_EMBED_BUDGET_MS = 150
# With [memory] reranker set: the cross-encoder rescores this many of recall's best (5 to 7 ms each here, one
# thread), and recall keeps its own order if the scores take longer than the budget.
RECALL_RERANK_TOP = 8
RECALL_RERANK_BUDGET_MS = 50
RECALL_TOOL_MAX_ITEMS = 10

# --- Memory: horizons, decay, notes ----------------------------------------------
HORIZON_ONE_OFF_DAYS = 30
HORIZON_INTENTION_HOURS = 72
NOTES_RETENTION_DAYS = 14
CONSOLIDATION_HOUR = 3
CONSOLIDATION_CHUNK_CHARS = 12_000
# The optional local NLI check's bar: the lowest probability of entailment that lets a memory through.
ENTAILMENT_THRESHOLD = 0.5

# --- Conflict questions ------------------------------------------------------------
QUESTIONS_PER_HOUR = 5
OPEN_QUESTIONS_PER_PERSON = 1

# --- Heartbeat -------------------------------------------------------------------------
HEARTBEAT_EVERY_MINUTES = 30
HEARTBEAT_ACTIVE_START_HOUR = 8
HEARTBEAT_ACTIVE_END_HOUR = 22
HEARTBEAT_TOKEN_BUDGET = 1_500
HEARTBEAT_RETRY_BASE_S = 60.0
HEARTBEAT_MAX_RETRIES = 5
HEARTBEAT_BUSY_DEFER_S = 60.0  # a person mid-reply: try again this much later
HEARTBEAT_RETRY_MAX_S = 3_600.0  # backoff ceiling between retries of a failed heartbeat
DECAY_WEEKDAY = "sun"  # the weekly decay runs with Sunday's nightly consolidation
DECAY_STALE_DAYS = 180  # an unconfirmed, never-used episode or project untouched this long is stale


# --- Policy ----------------------------------------------------------------------------
PAIRING_CODE_LENGTH = 8
PAIRING_CODE_TTL_S = 3_600
PAIRING_MAX_PENDING = 3  # per platform
RATE_LIMIT_BURST = 8  # messages a sender may send at once
RATE_LIMIT_PER_MINUTE = 20.0  # sustained refill
LINK_CODE_TTL_S = 600
LINK_FAILURES_PER_HOUR = 5  # wrong or expired /link codes one account may send in an hour before it is refused
LINK_FAILURE_WINDOW_S = 3_600

# --- Delivery --------------------------------------------------------------------------
DISCORD_READY_TIMEOUT_S = 30.0
SEND_MAX_ATTEMPTS = 6
SEND_BACKOFF_BASE_S = 1.0
SEND_BACKOFF_MAX_S = 60.0
TYPING_REFRESH_S = 4.0  # Telegram's typing status lasts ~5 s
TYPING_DELAY_S = 0.3  # no indicator for a reply ready sooner than this
OUTBOX_SWEEP_S = 10.0  # a running bot looks this often for outbox work queued outside it (bot.py heartbeat)
FAILED_LANE_RETRY_S = 300.0  # a chat whose delivery task failed unexpectedly: the sweep tries it again after this
DEBOUNCE_MS = 800  # rapid messages from one sender inside this window become one turn
INBOUND_DEDUPE_DAYS = 7
INBOX_REPLAY_MAX_AGE_H = 24  # a message left unanswered by a crash is still answered this long after (Telegram
# keeps undelivered updates as long)
INBOX_REPLAYS_MAX = 3  # attempts at one message (its turn opened, in any process) before it gets the honest reply
INBOX_RETRY_BACKOFF_S = 2.0  # a turn that failed unexpectedly in a running process is tried again after this,
INBOX_RETRY_BACKOFF_MAX_S = 30.0  # doubling up to this (a database that stays full)
INBOUND_BATCH_ATTEMPTS = 3  # a polled batch racing another process's records of it: tries before giving up

# --- The relational store (ground/db.py) ----------------------------------------
SQLITE_BUSY_TIMEOUT_MS = 5_000  # how long a transaction waits for another process's write lock
SQLITE_CHECKPOINT_COMMITS = 500  # commits between checkpoints of the write-ahead log (SQLite's own: 1,000 pages)
LOG_ERROR_REASON_MAX_CHARS = 120  # of a database's reason for refusing work, in a handled failure's log line

# --- Delivery (delivery/worker.py) --------------------------------------------
DELIVERY_LANE_ENDS_KEPT = 4_096  # chats whose delivery task's latest end is remembered (past it: one more read)
# After SEND_MAX_ATTEMPTS quick retries a transient failure (an outage) is not given up: the reply waits this long,
# doubling per failure up to the ceiling, until it is delivered or SEND_MAX_LATE_H old.
SEND_LONG_BACKOFF_BASE_S = 300.0
SEND_LONG_BACKOFF_MAX_S = 3_600.0
SEND_MAX_LATE_H = INBOX_REPLAY_MAX_AGE_H  # a reply is never delivered later than a message is answered
SEND_RETRY_AFTER_MARGIN_S = 0.05  # past a platform's retry_after: its clock and ours differ, and a 0 must not
# spin; fixed, never grown
DELIVERY_PARK_AFTER_S = 60.0  # a chat whose next try is further off leaves its task; the sweep takes it up when due
OUTBOX_SENT_RETENTION_DAYS = 7.0  # delivered replies are kept this long (their attachments not at all)
RETENTION_INTERVAL_S = 3_600.0  # how often a running bot prunes the inbound journal and the delivered outbox
RETENTION_BATCH_ROWS = 1_000  # rows pruned per transaction, so a long-unpruned database never holds up replies

# --- Debounce (conversation/debounce.py) -------------------------------------
DEBOUNCE_MAX_MESSAGES = 20  # a burst this long is answered at once, so a steady typist is never left waiting

# --- Policy (policy/pairing.py) -----------------------------------------------
PAIRING_REMINDER_INTERVAL_S = 600

# --- Telegram channel (channels/telegram/) ------------------------------------
TELEGRAM_HTTP_TIMEOUT_S = 10.0  # connect/write budget of one ordinary Bot API call
# How long a Bot API call waits for its answer. Past it a send counts as maybe delivered (it is sent again, the one
# duplicate Telegram allows), so it is well above a slow answer rather than a typical one.
TELEGRAM_SEND_TIMEOUT_S = 30.0
TELEGRAM_POLL_READ_MARGIN_S = 10.0  # getUpdates may take poll_timeout_s; allow this much more to read the answer
TELEGRAM_POLL_BACKOFF_BASE_S = 1.0  # first wait after a failed getUpdates; doubles per failure
TELEGRAM_POLL_BACKOFF_MAX_S = 60.0
TELEGRAM_STOP_GRACE_S = 5.0  # on stop, handlers already handed an update may finish this long
# Telegram numbers updates one by one; an id this far above the offset it was fetched with is not the next one
# (a glitch, or ids restarted after a week's silence) and is not trusted as the restart point until confirmed.
TELEGRAM_UPDATE_ID_JUMP_MAX = 1_000_000

# --- Slack channel (channels/slack/) ------------------------------------------
SLACK_HTTP_TIMEOUT_S = 10.0  # connect (and write) budget of one Web API call; doctor's whole call
# How long a Web API call waits for its answer once sent. Past it a send counts as maybe delivered (looked for,
# then sent again), so it is well above a slow answer rather than a typical one, as Telegram's.
SLACK_SEND_TIMEOUT_S = 30.0
SLACK_SOCKET_PING_INTERVAL_S = 10.0  # Socket Mode keep-alive; a dead socket is noticed within about this long
SLACK_CONNECT_WAIT_S = 10.0  # start() waits this long for the socket's hello, then keeps trying in the background
SLACK_STOP_GRACE_S = 5.0  # on stop, handlers already handed an event may finish this long
SLACK_NAME_CACHE_SIZE = 1_000  # people whose display name (users.info) is remembered
SLACK_NAME_CACHE_TTL_S = 3_600.0
SLACK_NAME_LOOKUP_TIMEOUT_S = 2.0  # a slow users.info costs a reply this much at most; the user id stands in
# A send whose answer was lost is looked for (by its metadata marker) before it is sent again: in this many pages
# of the conversation's history since the lost attempt, less the skew allowed between our clock and Slack's.
SLACK_LOOKUP_PAGES = 3
SLACK_LOOKUP_PAGE_SIZE = 100
SLACK_LOOKUP_SKEW_S = 60.0
SLACK_LOST_SENDS_KEPT = 1_000  # lost sends remembered for that look; the oldest is forgotten past this

# --- Discord channel (channels/discord/) --------------------------------------
DISCORD_GUILD_READY_TIMEOUT_S = 2.0  # discord.py's wait for one more GUILD_CREATE before READY counts
DISCORD_MAX_RATELIMIT_WAIT_S = 30.0  # discord.py sleeps out 429s up to this (its minimum); longer → SendError
DISCORD_STOP_GRACE_S = 5.0  # on stop, handlers already handed a message may finish this long
DISCORD_REIDENTIFY_DELAY_S = 5.0  # wait before a fresh IDENTIFY after a lost session (Discord: 1 per 5 s)
DISCORD_HTTP_TIMEOUT_S = 10.0  # connect budget of a send
# How long a send waits for Discord's answer. Past it the send counts as maybe delivered (sent again with the same
# nonce, which Discord answers with the message it posted), so it is well above a slow answer, as Telegram's.
DISCORD_SEND_TIMEOUT_S = 30.0
# A new gateway session (a start, or a session Discord would not resume) reads what it missed in the channels where
# a message was taken in within these days: Discord redelivers nothing to a fresh session.
DISCORD_CATCH_UP_DAYS = 7
DISCORD_CATCH_UP_CHANNELS_MAX = 1_000  # the most recently active channels first
DISCORD_CATCH_UP_MESSAGES_MAX = 500  # read per channel at most (not older than INBOX_REPLAY_MAX_AGE_H either)
DISCORD_CATCH_UP_CONCURRENCY = 4  # channels read at once, to stay well inside Discord's rate limits

# --- Memory: embedders (memory/encoders/embedders.py) ----------------------------------
EMBED_TRACE_MIN_COSINE = 0.9999  # a traced encoder must agree with encode() at least this well on every probe
HASH_DIM = 256  # dimensions of the hashed bag-of-words vector used when no embedder vector exists
EMBEDDER_PROBE_TIMEOUT_S = 60.0  # first use may load (or fetch) a model
EMBED_TIMEOUT_S = 30.0  # one embedding call after the probe
EMBED_BATCH = 64

# --- Memory: the merge/conflict gate (memory/capture/merge_gate.py) -------------------------
MERGE_IMPORTANCE_BOOST = 0.05  # a repeated fact matters a little more each time
MAX_CONFLICT_LINKS = 3  # one new fact flags at most this many stored ones
GATE_QUERY_WORDS = 3  # a near-duplicate shares its rarest words: BM25 looks for those only
MAX_EVIDENCE_PER_MEMORY = 20  # the newest quotes and sources are kept when a fact is repeated often

# --- Memory: capture (memory/capture/job.py) --------------------------------------
CAPTURE_MAX_TURNS = 200  # turns one run reads after its cursor
CAPTURE_MAX_CHUNKS_PER_RUN = 4  # the rest waits for the next reply
CAPTURE_MAX_ATTEMPTS = 3  # tries at one chunk while the model cannot be reached
CAPTURE_SHOWN_MEMORIES = 8  # stored memories shown to the model, so it can correct them by id
CAPTURE_MAX_TOKENS = 3_000  # the extractor's answer budget

# --- Memory: the person's controls (memory/controls/) -----------------------
MEMORY_PAGE_SIZE = 10  # memories per /memory page
FORGET_PLAN_TTL_S = 600  # a shown forget plan can be confirmed this long
WHY_MAX_HITS = 3  # memories /why explains for a text query
REMEMBER_IMPORTANCE = 0.7  # a fact the person asked kith to keep matters more than a captured one

# --- Conflict questions and memory commands (conversation/memory_commands.py) ---------
QUESTION_RECHECK_S = 300.0  # after replies, one person's conflicts are looked at most this often
QUESTION_AFTER_REPLY_S = 1.0  # a question follows the reply it comes after, never overtakes it
QUESTION_QUOTE_CHARS = 200  # the longest quote a question or /why shows
WHY_RECEIPTS = 3  # quotes and sources /why shows per memory
FORGET_PREVIEW_MAX = 20  # memories a forget plan lists before "and N more"

# --- Recall: ranking (memory/recall/ranking.py) --------------------------------------
RECALL_RECENCY_FLOOR = 0.8  # a very old memory keeps 80 % of its score: recency reorders close matches only
RECALL_MIN_RELEVANCE = 0.2  # automatic context only: weaker candidates stay out of the prompt
CITE_MIN_WORD_CHARS = 3  # shorter words ("go", "tv") are too common to count as a citation
CITE_FEW_WORDS = 3  # a memory with at most this many distinctive words is cited by one of them

# --- Recall: the prompt part (memory/recall/prompt_part.py) -----------------------
RECALL_MIN_ITEM_CHARS = 60  # a candidate squeezed below this by the part's budget is left out

# --- Recall: the recall tool (memory/recall/recall_tool.py) --------------------------
RECALL_TOOL_EMBED_BUDGET_MS = 2_000  # a deliberate search may wait longer for its embedding than a reply's context
RECALL_TOOL_EVIDENCE = 3  # newest evidence quotes per result
RECALL_TOOL_QUOTE_CHARS = 500
RECALL_TOOL_MAX_CHARS = 12_000  # the whole JSON answer; the weakest results go first
RECALL_TOOL_DOCUMENT_PASSAGES = 5  # passages of the person's documents one private call returns at most

# --- Memory: similarity (memory/core/similarity.py) --------------------------------
DISTINCTIVE_MIN_CHARS = 3

# --- Memory: text matching (memory/core/text.py) -----------------------------------
INFLECTION_MIN_STEM_CHARS = 3

# --- Memory: BM25 (memory/core/bm25.py) --------------------------------------------
BM25_K1 = 1.5
BM25_B = 0.75

# --- Memory: records (memory/core/records.py) --------------------------------------
DEFAULT_IMPORTANCE = 0.5

# --- Memory: the store (memory/store/) --------------------------------------
CHROMA_CHECK_TIMEOUT_S = 10.0
STORE_PAGE = 500  # records per Chroma round trip when scanning
# Chroma's own default: writes to a collection between two saves of its vector index to disk (a collection's
# configuration may say otherwise; what it says is used).
CHROMA_SYNC_THRESHOLD = 1000
# Records embedded and written per step of a migration to another embedder (memory/reembed.py): the most a
# kill makes it embed again, and how often its progress moves.
REEMBED_BATCH = 64
REEMBED_LOG_EVERY_S = 30.0  # a start re-embedding many records logs how far it got this often
FILTERED_QUERY_MAX = 500  # up to this many memories, a person is searched with Chroma's metadata filter
NEAREST_OVERSAMPLE = 2.0  # beyond it, an unfiltered search fetches this many times the person's share
NEAREST_POOL_MAX = 1_000  # ... unless that pool would be larger than this: then filtered after all
LEXICAL_PRUNE_MIN_MEMORIES = 200  # below this, BM25 keeps every query word
LEXICAL_MAX_DF_FRACTION = 0.2  # a query word in more of a person's memories than this is left out of BM25
CHANGE_CATCHUP_MAX = 2_000  # other writers' changes re-read one by one; more than this: rebuild from Chroma

# --- Recall: the engine (memory/recall/engine.py) ------------------------------------
RECALL_POOL_MIN = 50  # candidates each path fetches at least, before blending
RECALL_POOL_FACTOR = 3  # ... or this many times the results wanted
RECALL_QUERY_CACHE = 512  # query embeddings kept (LRU)
RECALL_NOTE_VECTOR_CACHE = 4_096  # staged-note embeddings kept (LRU)
RECALL_QUERY_MAX_CHARS = 2_000  # a longer message is matched on its first part
RECALL_PINNED_REFRESH_S = 30.0  # a person's pinned facts are re-read at most this often
RECALL_PINNED_READ_SHARE = 0.01  # ... and re-reading them may take at most this share of the store's time

# --- Memory: the change log (memory/store/changes.py) -------------------------------
CHANGE_LOG_KEEP = 100_000  # entries kept; a reader further behind than this rebuilds from Chroma
CHANGE_LOG_TRIM_EVERY = 1_000  # trim once per this many sequence numbers
CHANGE_LOG_OVERLAP = 256  # entries behind the cursor read again (late commits; not on SQLite)
# In-memory copies of shared data (the change log's position, goals) skip a read when no process
# wrote since a transaction of this process at most this old.
SHARED_CACHE_TRUST_S = 0.5

# --- Turns, linking and shutdown (conversation/core.py, conversation/linking.py, kith/app/lifecycle.py) ---
MAX_TOOL_ROUNDS = 3  # tool calls the persona may chain in one reply
MEMORY_SLOTS_TIMEOUT_S = 0.5  # memory must never hold a reply hostage
LINK_CODE_LENGTH = 8
SHUTDOWN_DELIVERY_S = 3.0  # replies still sending at shutdown get this long before they wait for the next start
# The garbage collector's thresholds once started (Python's are 700, 10, 10): a reply allocates
# thousands of short-lived objects that reference counting frees anyway, so a young-generation pass
# every 700 ran several times per message and a full one every few seconds in a burst.
GC_THRESHOLDS = (20_000, 20, 20)

# --- Platform fallbacks (channels/discord/, channels/slack/) -----------------------------------
FETCHED_PLACES_MAX = 1_024  # Discord threads remembered after one GET /channels/{id}; oldest forgotten first
SLACK_DEFAULT_RETRY_AFTER_S = 1.0  # Slack always sends Retry-After with a 429; this covers a proxy that drops it
DISCORD_DEFAULT_RETRY_AFTER_S = 5.0  # a 429 without retry_after

# --- Goals (memory/goals/) ------------------------------------------------------------------
GOAL_MAX_CHARS = 300
GOALS_MAX_OPEN = 30  # active plus paused goals one person may keep
GOALS_IN_PROMPT = 10  # at most this many active goals go into a prompt
GOALS_DONE_LISTED = 5  # the most recently finished goals /goals still shows
GOALS_REWARM_MIN_S = 60.0  # after a write elsewhere, everyone's goals are read again at most this often

# --- Heartbeat: what is due (heartbeat/due.py) -----------------------------------------------
HORIZON_SOON_HOURS = 24
GOAL_FOLLOW_UP_EVERY_DAYS = 3
HEARTBEAT_MAX_ITEMS_PER_TURN = 3
DUE_ITEM_CHARS = 400  # one memory or goal as shown to the heartbeat prompt
DISPUTES_FULL_SCAN_HOURS = 24  # between full scans, new disputes are found among new memories
DISPUTES_OVERLAP_S = 300  # each look at new memories reaches back this far, for writes that landed late
DISPUTES_INCREMENTAL_MAX = 1_000  # more new memories than this (an import): one full scan is cheaper

# --- Heartbeat: proactive turns (heartbeat/check_ins.py) -----------------------------------------
HEARTBEAT_REPLY_TOKENS = 300  # the answer's share of token_budget (at most a third of it)
CHARS_PER_TOKEN = 4  # a rough average for English text; the prompt is clipped by characters
HEARTBEAT_CONCURRENCY = 4  # people whose turns run at once within one tick

# --- Nightly consolidation (heartbeat/consolidation.py) --------------------------------------
CONSOLIDATION_FIRST_RUN_DAYS = 7  # how far back the very first run reaches
CONSOLIDATION_DAY_PAGE = 2_000  # transcript rows read per query while loading a day

# --- Heartbeat: scheduling (heartbeat/scheduler.py) ------------------------------------------
MISFIRE_GRACE_S = 8 * 24 * 3600  # longer than the weekly decay's period, so its last missed run still runs
DECAY_MINUTE = 30  # decay runs this many minutes after the hour of Sunday's consolidation

# --- LLM: retries (llm/client.py) -------------------------------------------------------------
LLM_RETRY_BASE_S = 0.5
LLM_RETRY_MAX_S = 8.0

# --- Memory: search (memory/service.py) ------------------------------------------------------
SEARCH_POOL_FACTOR = 3  # each path fetches this many times the wanted hits before blending

# --- Compare-and-swap retries (policy/store.py, memory/store/) -------------------------------
ACCESS_CAS_ATTEMPTS = 5  # an access-state write that lost a race re-reads and tries again this often
# A memory's edit (MemoryStore.edit: every change to a stored memory, and the gate's decision to merge into one)
# that lost a race to another writer reads the memory again and tries again, this many times in all.
MEMORY_EDIT_ATTEMPTS = 5

# --- One writer per data directory: the lock and the control channel (ground/instance.py, kith/control/) ----
# One active bot per PostgreSQL database (ground/active_bot.py): a standby asks for the lock this often; the holder
# checks its session this often; a machine that vanished lets go within about this long (TCP keepalives).
ACTIVE_POLL_S = 1.0
ACTIVE_CHECK_S = 2.0
ACTIVE_KEEPALIVE_S = 6.0
ACTIVE_CONNECT_TIMEOUT_S = 10.0
DB_SERVER_THREADS = 4  # transactions run side by side on a server database (PostgreSQL); SQLite has one thread
LOCK_POLL_S = 0.05  # how often a waiting bot or command looks at the lock (and a command at the control socket)
LOCK_HOLDER_GRACE_S = 2.0  # a lock whose holder has not said who it is after this long is taken for a bot's
CONTROL_CONNECT_WAIT_S = 60.0  # a command waits this long for a starting bot to listen, then says why it gave up
CONTROL_STOP_GRACE_S = 3.0  # a command still running in a bot that stops gets this long, then is cancelled
CONTROL_REQUEST_MAX_BYTES = 1_000_000  # one request line; every real one is far smaller
CONTROL_UNIX_PATH_MAX = 100  # bytes of a socket path every platform binds (macOS: 104); longer ones use TCP
# Operator commands from another machine, as rows of a shared PostgreSQL database (kith/control/remote_*.py):
CONTROL_REMOTE_POLL_S = 1.0  # the active bot also looks for command rows this often, should a notification be missed
CONTROL_REMOTE_FLUSH_S = 0.05  # a command's output goes back in batches this far apart
CONTROL_REMOTE_KEEP_S = 60.0  # an answered command whose client never collected it is deleted after this
CONTROL_REMOTE_WAIT_S = 0.5  # the client checks the active bot is still there this often while it waits

# --- Operator commands: progress on standard error (kith/operator/progress.py) ----------------------
PROGRESS_BAR_REDRAW_S = 0.1  # a live bar on a terminal is redrawn at most this often
PROGRESS_LINE_EVERY_S = 5.0  # not on a terminal (a log, a pipe): one progress line this often

# --- The terminal chat's log file (kith/app/logs.py) ---------------------------------
LOG_FILE_MAX_BYTES = 5_000_000  # rotated past this size ...
LOG_FILE_BACKUPS = 3  # ... keeping this many older files

# --- doctor (kith/operator/doctor.py) --------------------------------------------------------
DOCTOR_MODEL_TIMEOUT_S = 30.0  # its one real call to the model waits at most this long

# --- setup (kith/setup/wizard.py) ------------------------------------------------------
SETUP_OLLAMA_LOOK_TIMEOUT_S = 3.0  # a local Ollama lists its models at once; past this it counts as not running

# --- the web page (kith/web) ----------------------------------------------------------------
WEB_PORT = 8765  # [web] port's default: one loopback port for the memory room
WEB_LOGIN_TOKEN_TTL_S = 600.0  # a login link works once, within this long of being printed
WEB_LOGIN_TOKENS_MAX = 20  # unused login links kept at once; printing another drops the oldest
WEB_SESSION_TTL_S = 8 * 3600.0  # a signed-in browser stays signed in this long, then needs a new link
WEB_SESSIONS_MAX = 20  # browsers signed in at once; a new sign-in ends the oldest session past this
WEB_PAGE_SIZE = 50  # memories on one page of a person's page
WEB_SEARCH_LIMIT = 20  # hits a search on a person's page shows
WEB_FORM_MAX_BYTES = 64_000  # a form's body; every real one is far smaller
WEB_STOP_GRACE_S = 3.0  # requests still running when the bot stops get this long
