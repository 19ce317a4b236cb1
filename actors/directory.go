package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist"
)

// Directory keys, written in the same batch as the events that create them
// (the external ids as Unique: in a cluster, the store refuses one another
// node wrote first):
//
//	agent/<ws>/<agent id>      → AgentCreated event (the agent's info)
//	agentext/<ws>/<external>   → agent id
//	run/<run id>               → agent id
//	runext/<ws>/<external>     → run id
//
// The directory is what lets a request find its actor without scanning.
func agentKey(ws, agentID string) []byte {
	return appendAgentKey(make([]byte, 0, len("agent/")+len(ws)+1+len(agentID)), ws, agentID)
}
func agentExtKey(ws, ext string) []byte { return []byte("agentext/" + ws + "/" + ext) }
func runKey(runID string) []byte        { return appendRunKey(make([]byte, 0, len("run/")+len(runID)), runID) }
func runExtKey(ws, ext string) []byte   { return []byte("runext/" + ws + "/" + ext) }

// The append forms build a key where the caller has room: on the stack
// (cachedAgent), or in front of its value (appendIndex).
func appendAgentKey(dst []byte, ws, agentID string) []byte {
	return append(append(append(append(dst, "agent/"...), ws...), '/'), agentID...)
}
func appendRunKey(dst []byte, runID string) []byte { return append(append(dst, "run/"...), runID...) }

// appendIndex appends to dst the directory entries an event of an agent of
// workspace ws creates.
func appendIndex(dst []persist.KV, ws string, ev engine.Event, encoded []byte) []persist.KV {
	switch e := ev.(type) {
	case engine.AgentCreated:
		dst = append(dst, persist.KV{Key: agentKey(e.Info.Workspace, e.Info.ID), Value: encoded})
		if e.Info.ExternalID != "" {
			dst = append(dst, persist.KV{Key: agentExtKey(e.Info.Workspace, e.Info.ExternalID), Value: []byte(e.Info.ID),
				Unique: true})
		}
	case engine.RunCreated:
		// Every selection makes this entry: its key and value share one
		// allocation.
		b := appendRunKey(make([]byte, 0, len("run/")+len(e.Run.ID)+len(e.Run.AgentID)), e.Run.ID)
		key := b[:len(b):len(b)]
		dst = append(dst, persist.KV{Key: key, Value: append(b, e.Run.AgentID...)[len(key):]})
		if e.Run.ExternalID != "" {
			dst = append(dst, persist.KV{Key: runExtKey(ws, e.Run.ExternalID), Value: []byte(e.Run.ID), Unique: true})
		}
	}
	return dst
}

// Agent returns the info of an agent of workspace ws, by id or
// "external_id:<value>". An agent of another workspace is ErrNotFound.
func (r *Registry) Agent(ws, ref string) (engine.AgentInfo, error) {
	agentID := ref
	if ext, ok := strings.CutPrefix(ref, "external_id:"); ok {
		v, err := r.dirGet(agentExtKey(ws, ext))
		if err != nil {
			return engine.AgentInfo{}, notFound("agent", ref, err)
		}
		agentID = string(v)
	}
	if strings.ContainsRune(agentID, '/') {
		return engine.AgentInfo{}, fmt.Errorf("agent %s: %w", ref, engine.ErrNotFound)
	}
	// An agent's info never changes once created, so a found one is kept:
	// every request resolves its agent, and this spares it a store read.
	if info, ok := r.cachedAgent(ws, agentID); ok {
		return info, nil
	}
	key := agentKey(ws, agentID)
	v, err := r.dirGet(key)
	if err != nil {
		return engine.AgentInfo{}, notFound("agent", ref, err)
	}
	info, err := decodeAgentInfo(v)
	if err == nil {
		r.infoMu.Lock()
		if r.agentInfos == nil {
			r.agentInfos = map[string]engine.AgentInfo{}
		}
		r.agentInfos[string(key)] = info
		r.infoMu.Unlock()
	}
	return info, err
}

// cachedAgent returns the kept info of an agent, if any.
func (r *Registry) cachedAgent(ws, agentID string) (engine.AgentInfo, bool) {
	var buf [128]byte
	key := appendAgentKey(buf[:0], ws, agentID)
	r.infoMu.RLock()
	info, ok := r.agentInfos[string(key)]
	r.infoMu.RUnlock()
	return info, ok
}

// Agents lists the agents of workspace ws in id (creation) order.
func (r *Registry) Agents(ws string) ([]engine.AgentInfo, error) {
	var out []engine.AgentInfo
	err := r.store.Scan([]byte("agent/"+ws+"/"), func(_, v []byte) error {
		info, err := decodeAgentInfo(v)
		if err == nil {
			out = append(out, info)
		}
		return err
	})
	return out, err
}

// Run finds a run of workspace ws, by id or "external_id:<value>", and
// returns its id and its agent. A run of another workspace is ErrNotFound.
func (r *Registry) Run(ws, ref string) (string, engine.AgentInfo, error) {
	runID := ref
	if ext, ok := strings.CutPrefix(ref, "external_id:"); ok {
		v, err := r.fixedGet(runExtKey(ws, ext))
		if err != nil {
			return "", engine.AgentInfo{}, notFound("run", ref, err)
		}
		runID = string(v)
	}
	v, err := r.fixedGet(runKey(runID))
	if err != nil {
		return "", engine.AgentInfo{}, notFound("run", ref, err)
	}
	info, err := r.Agent(ws, string(v))
	if errors.Is(err, engine.ErrNotFound) {
		return "", engine.AgentInfo{}, notFound("run", ref, persist.ErrNotFound)
	}
	return runID, info, err
}

// CreateRun creates a run of agent (selection: see engine.CreateRun). A
// run's external id is unique in its workspace: a second run claiming one
// is ErrConflict. Without hold, the answer comes before the run is durable
// unless Config.DurableSelect (see answerEarly); with hold, see Write.
func (r *Registry) CreateRun(agent engine.AgentInfo, cmd engine.CreateRun, by time.Time, hold bool) (*Outcome[engine.CreatedRun], error) {
	release := func() {}
	if cmd.ExternalID != "" {
		key := runExtKey(agent.Workspace, cmd.ExternalID)
		release = r.externalIDs.acquire(string(key))
		if err := r.checkUnused(key, "run", cmd.ExternalID); err != nil {
			release()
			return nil, err
		}
	}
	return write(r, agent.ID, by, hold, true, func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.CreatedRun, []engine.Event, error) {
		return a.CreateRun(cmd, now, rnd)
	}, release)
}

func decodeAgentInfo(v []byte) (engine.AgentInfo, error) {
	ev, err := engine.DecodeEvent(v)
	if err != nil {
		return engine.AgentInfo{}, fmt.Errorf("directory: %w", err)
	}
	created, ok := ev.(engine.AgentCreated)
	if !ok {
		return engine.AgentInfo{}, fmt.Errorf("directory: agent record holds %T", ev)
	}
	return created.Info, nil
}

func notFound(what, ref string, err error) error {
	if errors.Is(err, persist.ErrNotFound) {
		return fmt.Errorf("%s %s: %w", what, ref, engine.ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", what, ref, err)
}

// fixedGet is dirGet for a key whose value never changes once durable: a
// durable value is cached. One published ahead of its append is not, since
// the append may yet fail.
func (r *Registry) fixedGet(key []byte) ([]byte, error) {
	if v, ok := r.fixed.Get(key); ok {
		return v, nil
	}
	if v, ok := r.pendingIdx.get(key); ok {
		return v, nil
	}
	v, err := r.store.Get(key)
	if err == nil {
		r.fixed.Put(key, v)
	}
	return v, err
}

// dirGet reads a directory key, including entries published ahead of their
// append by the selection fast path.
func (r *Registry) dirGet(key []byte) ([]byte, error) {
	if v, ok := r.pendingIdx.get(key); ok {
		return v, nil
	}
	return r.store.Get(key)
}
